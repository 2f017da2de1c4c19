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

"""The fixes, one module per fix, named after it (bug_<id>.py, or the
fix's name when it has no bug): each holds the fix's record (FIX) with
everything about it. FIXES is their order, which is the order of the
patches of every series but for the changes FIRST brings forward.
"""

from nova_fixes import errors
from nova_fixes.fixes import bug_1848343
from nova_fixes.fixes import bug_1859496
from nova_fixes.fixes import delete_mapping
from nova_fixes.fixes import interrupted_moves
from nova_fixes.fixes import manage_audit
from nova_fixes.fixes import orphans
from nova_fixes.fixes import stale_moves

# 1859496 first: the delete paths 1848343 makes refuse a delete when
# placement cannot serve it use its PlacementUnavailableForDelete and the
# servers controller's 503.
FIXES = (
    bug_1859496.FIX,
    bug_1848343.FIX,
    orphans.FIX,
    interrupted_moves.FIX,
    stale_moves.FIX,
    delete_mapping.FIX,
    manage_audit.FIX,
)

#: Changes (fix name, change slug) that come first in every series, in
#: this order, before the fixes' other patches; each fix's changes keep
#: their own order. The revert paths of 1848343 need no other change: a
#: packager takes that one alone, and nova's reviewers can merge it first.
FIRST = (
    ('bug_1848343', bug_1848343.REVERT_SLUG),
)

FIXES_BY_BUG = {str(fix.bug): fix for fix in FIXES}


def get_fix(bug):
    try:
        return FIXES_BY_BUG[str(bug)]
    except KeyError:
        raise errors.UnknownFix(bug, sorted(FIXES_BY_BUG))
