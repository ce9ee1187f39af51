"""openstack leveller snapshot"""

import json
import os

from osc_lib import exceptions
from osc_lib.command import command

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

    def take_action(self, parsed_args):
        document = common.read_cloud(
            self.app, common.settings(parsed_args, self.app))
        try:
            snap = snapshot_io.parse(document, origin='the cloud')
        except snapshot_io.SnapshotError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        path = parsed_args.output_file
        try:
            with open(path + '.tmp', 'w', encoding='utf-8') as f:
                json.dump(document, f, indent=1, sort_keys=True)
                f.write('\n')
            os.replace(path + '.tmp', path)
        except OSError as exc:
            raise exceptions.CommandError(
                'cannot write snapshot file %s: %s' % (path, exc)) from exc
        return (('File', 'Taken At', 'Hypervisors', 'Servers',
                 'Server Groups', 'Migrations'),
                (path, document['taken_at'], len(snap.hypervisors),
                 len(snap.servers), len(snap.server_groups),
                 len(snap.migrations)))
