#!/bin/sh
# The job, as a host's cron or systemd timer runs it on a kolla-ansible
# controller: /etc/kolla/osc-leveller holds clouds.yaml (the admin cloud,
# readable by uid 42480), the named volume keeps the lock and the journal.
exec docker run --rm --name osc_leveller_apply --network host \
    -v /etc/kolla/osc-leveller/clouds.yaml:/etc/openstack/clouds.yaml:ro \
    -v osc_leveller:/var/lib/osc-leveller \
    -v kolla_logs:/var/log/kolla \
    -e OS_CLOUD=admin \
    osc-leveller \
    leveller apply --batch 1 --cloud-lock 10m \
    --lock-file /var/lib/osc-leveller/apply.lock \
    --journal /var/log/kolla/osc-leveller/journal.jsonl \
    -f value -c Status
