"""openstack leveller snapshot"""

from osc_lib.command import command

from osc_leveller.core.model import files
from osc_leveller.core.model import snapshot as snapshot_io
from osc_leveller.v1 import common
from osc_leveller.v1 import flags
from osc_leveller.v1 import outputs

WHAT = 'snapshot file'


class SnapshotLeveller(outputs.StdoutCommand, command.ShowOne):
    """Save the live cloud's state to a snapshot file for offline planning"""

    auth_required = False  # connects itself, like score and plan

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--output-file', metavar='<file>', required=True,
            help='Write the snapshot here (format osc-leveller-snapshot/1); '
                 '"-" for standard output, which then holds the snapshot '
                 'alone')
        common.add_source_options(parser, snapshot=False)
        flags.add(parser, outputs.FOLLOW)
        return parser

    @common.boundary
    def take_action(self, parsed_args):
        path = common.given(parsed_args, 'output_file')
        effective = common.settings(parsed_args, self.app)
        outputs.check([('--output-file', path)],
                      read=outputs.read_files(parsed_args),
                      follow=effective[outputs.FOLLOW])
        document = common.read_cloud(self.app, effective)
        # Checked as any snapshot file is read; only its counts are kept,
        # so that the model is not held while the file is written.
        snap = snapshot_io.parse(document, origin='the cloud')
        note = snap.source.get('note')
        counts = (len(snap.hypervisors), len(snap.servers),
                  len(snap.server_groups), len(snap.migrations))
        del snap
        say = common.StderrWriter(self.app)
        if note:
            say('Note: %s' % note)
        outputs.write(self.app, path, files.dump_json(document, WHAT, path),
                      WHAT, effective[outputs.FOLLOW])
        if path == outputs.STDOUT:
            say('Snapshot of %s and %s taken at %s written to standard '
                'output' % (common.plural(counts[0], 'hypervisor'),
                            common.plural(counts[1], 'server'),
                            document['taken_at']))
        return (('File', 'Taken At', 'Hypervisors', 'Servers',
                 'Server Groups', 'Migrations'),
                (path, document['taken_at']) + counts)
