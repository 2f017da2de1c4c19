# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Options of the compute periodic task for orphan instances."""

from oslo_config import cfg

orphan_group = cfg.OptGroup(
    'orphan_instances',
    title='Orphan instances options',
    help="""
Guests running on a compute host that nova does not account for on
that host: *unknown* guests, with no instance record at all in the
cell database and no instance mapping in the API database (created
out of band, or deleted and then archived), and *foreign* guests,
whose live record names another compute host while no migration
involving this host is in progress (the duplicate that a failed live
migration cleanup leaves on the source).

Guests whose record is deleted but still present are left to nova's
own running_deleted_instance_action task; guests with a hidden
record (either side of a cross-cell resize), with a record naming no
host (shelved) or with a migration in progress involving this host
are never orphans. When the instance mappings cannot be read (a cell
conductor without the API database), a guest with no record in the
cell is unknown only if the cell has no migration of it and
placement holds no allocations for it; when those cannot be read
either, no guest is found unknown.
""")

ALL_OPTS = [
    cfg.StrOpt('action',
        default='log',
        choices=[
            ('log', 'Log each orphan guest and change nothing.'),
            ('stop', 'Power the orphan guest off; nothing is deleted.'),
            ('reap', 'Destroy the orphan guest on this host only: its '
                     'disks, volumes and ports are left alone.'),
        ],
        help="""
What the orphan instances task does with a guest once it has been an
orphan for grace_period seconds.

log is the safe default: review what it reports before choosing stop
or reap. Reaping destroys the guest on this host without destroying
disks (a foreign guest's live instance may use the same shared
storage), without detaching volumes and without unbinding ports, so
the live instance on its own host keeps its state and allocations.
Related bug: https://bugs.launchpad.net/nova/+bug/911366 (deleted
but running guests, handled by
[DEFAULT]running_deleted_instance_action).
"""),
    cfg.IntOpt('poll_interval',
        default=600,
        min=0,
        help="""
Seconds between two runs of the orphan instances task; 0 disables
it.

Each run makes a constant number of database round trips whatever
the number of guests, so a short interval is cheap; the grace
period, not the interval, decides how soon a guest is acted upon.
"""),
    cfg.IntOpt('grace_period',
        default=1800,
        min=0,
        help="""
Seconds a guest must stay an orphan, seen by consecutive runs,
before it is stopped or reaped; 0 acts on the first sighting.

The clock starts when this compute service first sees the guest as
an orphan and restarts with the service. Keep it longer than the
slowest move between your hosts, so that a guest caught in a window
nova does not flag as a migration is never touched.
"""),
    cfg.IntOpt('max_actions_per_run',
        default=5,
        min=1,
        help="""
The most guests one run stops or reaps; the others are logged and
left for the next run.

A bound on the damage of a misjudgement (for example a host name
changed in nova.conf, which makes every guest of the host look
foreign).
"""),
    cfg.ListOpt('ignore_uuids',
        default=[],
        item_type=cfg.types.String(
            regex=r'^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                  r'[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$'),
        help="""
UUIDs of guests the task must never touch: they are not even
reported.

Use it for guests deliberately run out of band on a compute host.
"""),
]


def register_opts(conf):
    conf.register_group(orphan_group)
    conf.register_opts(ALL_OPTS, group=orphan_group)


def list_opts():
    return {orphan_group: ALL_OPTS}
