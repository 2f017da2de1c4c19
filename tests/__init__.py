

"""The tests of nova-fixes.

Importing nova's test code prints what starting a nova service prints:
eventlet's EventletDeprecationWarning, nova's warning that modules were
imported before its monkey patching (which nova itself says to ignore
when nothing has run yet), its notice that the eventlet mode is
deprecated, an INFO line naming that mode, and (nova.test sets up
logging to stdout at INFO, then nova.compute.manager is imported) one
INFO line of oslo.service for the compute manager's periodic task that
is disabled; nova 29 and older also warn, at import, that
pkg_resources and jsonschema's FormatChecker.cls_checks are deprecated.
In a test process, or in the recreate runner reading the
test classes, that is noise printed above the results that reads like
an error. Those, and only those, are filtered here, before any test
module imports nova: the warning by its message, the log records by
logger and message. Every other warning and log record is shown as
before.

nova.test's handler also prints the INFO records logged outside a
test's own log capture (nova's StandardLogging): the fixes' activation
before it starts, nova's thread pools shutting down after it ends. So
that a run prints its results and not a page of INFO lines per test,
quiet_outside_tests() raises the handlers the root logger has outside
the tests to WARNING; what a test logs is captured as before and shown
with its failure.
"""

import logging
import warnings

#: {logger: messages (their start) dropped}
NOVA_IMPORT_NOISE = {
    'nova.monkey_patch': (
        'Modules with known eventlet monkey patching issues were imported',
        'Eventlet based concurrency mode is deprecated',
        'Service is starting with Eventlet based service backend',
    ),
    'oslo_service.periodic_task': (
        'Skipping periodic task %(task)s because its interval is negative',
    ),
}


class _Drop(logging.Filter):
    def __init__(self, messages):
        super(_Drop, self).__init__()
        self.messages = messages

    def filter(self, record):
        return not str(record.msg).startswith(self.messages)


warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
# nova 29 and older, at import: nova/virt/__init__.py declares a
# pkg_resources namespace, nova/api/validation/validators.py registers
# its format checker the old way.
warnings.filterwarnings('ignore', category=UserWarning,
                        message=r'pkg_resources is deprecated as an API')
warnings.filterwarnings('ignore', category=DeprecationWarning,
                        message=r'FormatChecker\.cls_checks is deprecated')
for _name, _messages in NOVA_IMPORT_NOISE.items():
    logging.getLogger(_name).addFilter(_Drop(_messages))


def quiet_outside_tests():
    """Keep WARNING and above from the root logger's handlers (nova.test's
    stdout handler); a test's own capture is not one of them.
    """
    for handler in logging.getLogger().handlers:
        if handler.level < logging.WARNING:
            handler.setLevel(logging.WARNING)
