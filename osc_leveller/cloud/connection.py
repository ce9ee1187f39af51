"""Open an openstacksdk connection from the openstack shell's options.

The leveller's commands do not make the shell authenticate up front
(``auth_required = False``), so ``--snapshot`` works with no cloud at all;
a live run asks for the connection here, with the same cloud selection the
shell would have used (``--os-cloud``, ``OS_*`` variables, clouds.yaml).
"""

from keystoneauth1 import exceptions as ksa_exc
from openstack import connection
from openstack import exceptions as sdk_exc

from osc_leveller.cloud import collect


def open_connection(cloud_config, options, request_id=None):
    """request_id: a global request id sent with every call (req-<uuid>)."""
    try:
        region = cloud_config.get_one(
            cloud=getattr(options, 'cloud', None), argparse=options,
            validate=True, app_name='osc-leveller')
        return connection.Connection(config=region,
                                     global_request_id=request_id)
    except (sdk_exc.ConfigException, ksa_exc.ClientException) as exc:
        raise collect.CollectError(
            'cannot connect to the cloud: %s (choose one with --os-cloud or '
            'OS_* variables, or plan offline with --snapshot)' % exc) from exc


def leveller_section(cloud_config, options):
    """(cloud name, the ``leveller:`` section of its clouds.yaml entry).

    Reading it needs no credentials; a cloud that cannot be found has no
    section, and a live read then reports the real problem.
    """
    try:
        region = cloud_config.get_one(
            cloud=getattr(options, 'cloud', None), argparse=options,
            validate=False, app_name='osc-leveller')
    except sdk_exc.ConfigException:
        return None, None
    return region.name, region.config.get('leveller')
