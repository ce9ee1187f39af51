"""openstack leveller config show"""

from osc_lib.command import command

from osc_leveller.cloud import measure
from osc_leveller.core.settings import config
from osc_leveller.v1 import columns
from osc_leveller.v1 import common


class ShowConfig(command.Lister):
    """Show the effective leveller settings and where each comes from"""

    auth_required = False  # reads clouds.yaml and files only
    need_sort_by_cliff = False  # in the order of the reference page

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        common.add_planner_options(parser)
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        effective = common.settings(parsed_args, self.app)
        rows = []
        for name, value, source in effective.rows():
            column = columns.SettingColumn
            if value is None and config.BY_NAME[name].kind == config.FILE:
                column = columns.NoFileColumn
            elif value is None:
                value = _default_query(name, effective['prometheus.profile'])
            rows.append((name, column(value), source))
        return ('Setting', 'Value', 'Source'), rows


def _default_query(name, profile):
    """The PromQL a query left unset runs, so the operator sees it."""
    group, _, metric = name.rpartition('.')
    if group == 'prometheus.queries' and metric in measure.PROFILES[
            profile]:
        return measure.HOST_QUERIES[metric]
    return None  # server queries: those of the libvirt exporter found
