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

"""The explorer's faults, and its two modes.

The delete mode injects a fault at a step and deletes the server (the
fault ``delete`` is the delete alone); the survive mode injects the same
faults but the delete, lets the operation end, checks the survivor
property and only then deletes. A variant of the survive mode is its fault
with the prefix ``survive-``. Nothing here imports nova: the explorer's
parent process uses it too.
"""

#: The faults, in the order of the matrix' columns.
FAULTS = ('delete', 'down', 'outage', 'timeout', 'restart')
MODES = ('delete', 'survive')
#: A survive mode variant is its fault with this prefix.
SURVIVE = 'survive-'
#: The faults of the survive mode: each of the delete mode's but the
#: delete itself (its fault is the delete; the survive mode's control is
#: the undisturbed run, which checks the survivor property too).
SURVIVE_FAULTS = ('down', 'outage', 'timeout', 'restart')
ALL = FAULTS + tuple(SURVIVE + fault for fault in SURVIVE_FAULTS)


def is_survive(variant):
    """Whether ``variant`` is of the survive mode."""
    return variant.startswith(SURVIVE)


def fault(variant):
    """The fault of a variant of either mode (``survive-down``: down)."""
    return variant[len(SURVIVE):] if is_survive(variant) else variant


def mode(variant):
    return 'survive' if is_survive(variant) else 'delete'


def of_modes(faults, modes):
    """The variants that run ``faults`` in ``modes``."""
    variants = []
    if 'delete' in modes:
        variants += [f for f in faults]
    if 'survive' in modes:
        variants += [SURVIVE + f for f in faults if f in SURVIVE_FAULTS]
    return variants


def short(variant):
    """Three letters for the matrix' head: ``res``, ``Sre``."""
    if is_survive(variant):
        return 'S' + fault(variant)[:2]
    return variant[:3]
