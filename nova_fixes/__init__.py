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

"""nova-fixes: resource-leak fixes for OpenStack Nova.

Public API only; importing this package imports no nova code.
"""

from nova_fixes.activation import activate  # noqa: F401
from nova_fixes.activation import active_fixes  # noqa: F401
from nova_fixes.activation import deactivate  # noqa: F401
from nova_fixes.errors import NovaFixesError  # noqa: F401
from nova_fixes.errors import NovaNotInstalled  # noqa: F401
from nova_fixes.errors import TargetMismatch  # noqa: F401
from nova_fixes.errors import UnknownFix  # noqa: F401
from nova_fixes.errors import UnknownSeries  # noqa: F401
from nova_fixes.errors import UnsupportedNova  # noqa: F401
from nova_fixes.fixes import FIXES  # noqa: F401
