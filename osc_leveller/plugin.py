"""OpenStackClient plugin entry: the ``leveller`` command group."""

from osc_lib import utils

from osc_leveller.v1 import masking

API_NAME = 'leveller'
API_VERSION_OPTION = 'os_leveller_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = ('1',)

# The shell imports its plugins before it logs anything.
masking.install()


def make_client(instance):
    """The leveller talks to Nova and Placement through the SDK connection."""
    return instance.sdk_connection


def build_option_parser(parser):
    parser.add_argument(
        '--os-leveller-api-version',
        metavar='<leveller-api-version>',
        default=utils.env('OS_LEVELLER_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='Leveller command set version, default=%s '
             '(Env: OS_LEVELLER_API_VERSION)' % DEFAULT_API_VERSION)
    return parser
