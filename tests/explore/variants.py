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

"""The explorer's faults, and its three modes.

The delete mode injects a fault at a step and deletes the server (the
fault ``delete`` is the delete alone); the survive mode injects the same
faults but the delete, lets the operation end, checks the survivor
property and only then deletes. A variant of the survive mode is its fault
with the prefix ``survive-``. The audit mode injects no fault: it holds
the operation at a step, runs ``nova-fixes audit --heal`` there, lets the
operation end and checks the survivor property, then deletes; its one
variant is ``audit-heal``. Nothing here imports nova: the explorer's
parent process uses it too.
"""

#: The faults, in the order of the matrix' columns.
FAULTS = ('delete', 'down', 'outage', 'timeout', 'restart', 'dbfail')
#: The faults run when none are named: ``dbfail`` (the first database
#: write of the step's thread fails) is opt-in while the fixed side still
#: fails it (see the guide's race explorer page).
DEFAULT_FAULTS = ('delete', 'down', 'outage', 'timeout', 'restart')
#: The faults of the delete mode.
DELETE_FAULTS = DEFAULT_FAULTS
MODES = ('delete', 'survive', 'audit')
#: A survive mode variant is its fault with this prefix.
SURVIVE = 'survive-'
#: The faults of the survive mode: each of the delete mode's but the
#: delete itself (its fault is the delete; the survive mode's control is
#: the undisturbed run, which checks the survivor property too).
SURVIVE_FAULTS = ('down', 'outage', 'timeout', 'restart', 'dbfail')
#: The audit mode's variant: the audit heals at the held step.
AUDIT = 'audit-heal'
ALL = FAULTS + tuple(SURVIVE + fault for fault in SURVIVE_FAULTS) + (
    AUDIT,)


def is_survive(variant):
    """Whether ``variant`` is of the survive mode."""
    return variant.startswith(SURVIVE)


def is_audit(variant):
    """Whether ``variant`` is of the audit mode."""
    return variant == AUDIT


def fault(variant):
    """The fault of a variant of any mode (``survive-down``: down; the
    audit mode's: heal, the audit's own writes).
    """
    if is_audit(variant):
        return 'heal'
    return variant[len(SURVIVE):] if is_survive(variant) else variant


def mode(variant):
    if is_audit(variant):
        return 'audit'
    return 'survive' if is_survive(variant) else 'delete'


def of_modes(faults, modes):
    """The variants that run ``faults`` in ``modes``."""
    variants = []
    if 'delete' in modes:
        variants += [f for f in faults if f in DELETE_FAULTS]
    if 'survive' in modes:
        variants += [SURVIVE + f for f in faults if f in SURVIVE_FAULTS]
    if 'audit' in modes:
        variants.append(AUDIT)
    return variants


def short(variant):
    """Three letters for the matrix' head: ``res``, ``Sre``, ``Ahe``."""
    if is_audit(variant):
        return 'Ahe'
    if is_survive(variant):
        return 'S' + fault(variant)[:2]
    return variant[:3]
