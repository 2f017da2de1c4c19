

"""The tests of nova-fixes.

Importing nova's test code prints what starting a nova service prints:
eventlet's EventletDeprecationWarning, nova's warning that modules were
imported before its monkey patching (which nova itself says to ignore
when nothing has run yet), its notice that the eventlet mode is
deprecated, and an INFO line naming that mode. In a test process, or in
the recreate runner reading the test classes, that is noise printed
above the results that reads like an error. Those, and only those, are
filtered here, before any test module imports nova: by warning message,
and by message on nova.monkey_patch's logger. Every other warning and
log record is shown as before.
"""

import logging
import warnings

NOVA_IMPORT_NOISE = (
    'Modules with known eventlet monkey patching issues were imported',
    'Eventlet based concurrency mode is deprecated',
    'Service is starting with Eventlet based service backend',
)


class _NovaImportNoise(logging.Filter):
    def filter(self, record):
        return not str(record.msg).startswith(NOVA_IMPORT_NOISE)


warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
logging.getLogger('nova.monkey_patch').addFilter(_NovaImportNoise())
