"""openstack leveller snapshot"""

from osc_lib.command import command

from osc_leveller.core import files
from osc_leveller.core import snapshot as snapshot_io
from osc_leveller.v1 import common


class SnapshotLeveller(command.ShowOne):
    """Save the live cloud's state to a snapshot file for offline planning"""

    auth_required = False  # connects itself, like score and plan

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--output-file', metavar='<file>', required=True,
            help='Write the snapshot here (format osc-leveller-snapshot/1)')
        common.add_source_options(parser, snapshot=False)
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        path = common.given(parsed_args, 'output_file')
        document = common.read_cloud(
            self.app, common.settings(parsed_args, self.app))
        snap = snapshot_io.parse(document, origin='the cloud')
        if snap.source.get('note'):
            common.StderrWriter(self.app)('Note: %s' % snap.source['note'])
        files.write_json(path, document, 'snapshot file')
        return (('File', 'Taken At', 'Hypervisors', 'Servers',
                 'Server Groups', 'Migrations'),
                (path, document['taken_at'], len(snap.hypervisors),
                 len(snap.servers), len(snap.server_groups),
                 len(snap.migrations)))
