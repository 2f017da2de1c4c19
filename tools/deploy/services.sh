#!/usr/bin/env bash
# MariaDB and RabbitMQ for the deployment test (tests/deployment), on
# loopback only, without systemd or any init system.
#
#   tools/deploy/services.sh install        apt-get install what is missing
#   tools/deploy/services.sh start [SVC]    install if missing, start, wait
#   tools/deploy/services.sh stop [SVC]     stop (nothing running: no-op)
#   tools/deploy/services.sh restart [SVC]
#   tools/deploy/services.sh status [SVC]   exit 0 when running and ready
#   tools/deploy/services.sh vhosts NAME...  RabbitMQ virtual hosts NAME...,
#                                           made anew (deleted first), guest
#                                           allowed everything on them
#
# SVC is mariadb or rabbitmq; without it, both. Every action is
# idempotent. The daemons run from a state directory of their own
# ($NOVA_FIXES_DEPLOY_STATE, default /var/tmp/nova-fixes-deploy), not from
# the distribution's data directories, and are started directly (this
# script does not use service(8), systemctl or invoke-rc.d):
#
#   MariaDB   127.0.0.1:$NOVA_FIXES_DB_PORT (3306), socket $STATE/mariadb-run/mysqld.sock;
#             root logs in through the socket (unix_socket authentication)
#   RabbitMQ  node rabbit@localhost, AMQP 127.0.0.1:$NOVA_FIXES_AMQP_PORT
#             (5672), distribution 127.0.0.1:25672 (rabbitmqctl's own
#             127.0.0.1:35672-35682), epmd 127.0.0.1:4369,
#             no plugins; user guest/guest (loopback only by default)
#
# Readiness is waited for at most $NOVA_FIXES_SERVICE_WAIT seconds (120).
# Needs root (apt-get, and the daemons run as the mysql and rabbitmq users
# the packages create).
set -u -o pipefail

STATE=${NOVA_FIXES_DEPLOY_STATE:-/var/tmp/nova-fixes-deploy}
DB_PORT=${NOVA_FIXES_DB_PORT:-3306}
AMQP_PORT=${NOVA_FIXES_AMQP_PORT:-5672}
WAIT=${NOVA_FIXES_SERVICE_WAIT:-120}
NODE=rabbit@localhost

DB_DIR=$STATE/mariadb
DB_RUN=$STATE/mariadb-run
DB_SOCK=$DB_RUN/mysqld.sock
DB_PID=$DB_RUN/mysqld.pid
MQ_DIR=$STATE/rabbitmq

die() {
    echo "services.sh: $*" >&2
    exit 1
}

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons as their users)"
}

install() {
    local missing=()
    command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
    [ "${#missing[@]}" -eq 0 ] && return 0
    need_root
    echo "services.sh: installing ${missing[*]}"
    # The packages' maintainer scripts would start the daemons on their
    # default (all-interface) configuration: forbid that while installing.
    local policy=/usr/sbin/policy-rc.d created=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && created=1
    fi
    apt-get update -q >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends "${missing[@]}" >/dev/null
    local rc=$?
    [ -n "$created" ] && rm -f "$policy"
    [ "$rc" -eq 0 ] || die "apt-get install ${missing[*]} failed"
}

wait_for() {
    # wait_for WHAT COMMAND...: run COMMAND every second until it succeeds,
    # at most $WAIT seconds.
    local what=$1 deadline=$((SECONDS + WAIT))
    shift
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            die "$what not ready after ${WAIT}s"
        fi
        sleep 1
    done
}

# -- MariaDB ----------------------------------------------------------------

db_client() {
    mariadb --no-defaults --socket="$DB_SOCK" -uroot "$@"
}

db_running() {
    [ -f "$DB_PID" ] && kill -0 "$(cat "$DB_PID")" 2>/dev/null
}

db_ready() {
    db_running && db_client -e 'SELECT 1'
}

db_start() {
    db_ready >/dev/null 2>&1 && return 0
    mkdir -p "$STATE" && chmod 755 "$STATE"
    if [ ! -d "$DB_DIR/mysql" ]; then
        mkdir -p "$DB_DIR" && chown mysql:mysql "$DB_DIR"
        mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DIR" \
            --auth-root-authentication-method=socket \
            > "$STATE/mariadb-install.log" 2>&1 ||
            die "mariadb-install-db failed, see $STATE/mariadb-install.log"
    fi
    mkdir -p "$DB_RUN" && chown mysql:mysql "$DB_RUN"
    cd "$DB_RUN" || die "cannot enter $DB_RUN"
    setsid mariadbd --no-defaults --user=mysql --datadir="$DB_DIR" \
        --bind-address=127.0.0.1 --port="$DB_PORT" --socket="$DB_SOCK" \
        --pid-file="$DB_PID" --log-error="$DB_RUN/mariadb.log" \
        --skip-name-resolve --max-connections=1000 \
        --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit=2 \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
        </dev/null >/dev/null 2>&1 &
    wait_for MariaDB db_ready
    echo "services.sh: MariaDB ready on 127.0.0.1:$DB_PORT"
}

db_stop() {
    db_running || return 0
    local pid
    pid=$(cat "$DB_PID")
    kill -TERM "$pid" 2>/dev/null
    wait_for 'MariaDB shutdown' bash -c "! kill -0 $pid"
    echo "services.sh: MariaDB stopped"
}

# -- RabbitMQ -----------------------------------------------------------------

MQ_ENV=(
    HOME=/var/lib/rabbitmq
    RABBITMQ_NODENAME=$NODE
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    RABBITMQ_NODE_PORT="$AMQP_PORT"
    RABBITMQ_DIST_PORT=25672
    ERL_EPMD_ADDRESS=127.0.0.1
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    # rabbitmqctl runs an Erlang node of its own, which listens for the
    # distribution (35672-35682) on every interface unless told otherwise.
    RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    RABBITMQ_MNESIA_BASE="$MQ_DIR/mnesia"
    RABBITMQ_LOG_BASE="$MQ_DIR/log"
    RABBITMQ_ENABLED_PLUGINS_FILE="$MQ_DIR/enabled_plugins"
    RABBITMQ_CONFIG_FILE="$MQ_DIR/rabbitmq.conf"
    RABBITMQ_PID_FILE="$MQ_DIR/rabbit.pid"
)

mq_env() {
    env "${MQ_ENV[@]}" "$@"
}

mq_ctl() {
    mq_env runuser -u rabbitmq -- /usr/lib/rabbitmq/bin/rabbitmqctl \
        -n "$NODE" "$@"
}

mq_ready() {
    mq_ctl status >/dev/null 2>&1 && mq_ctl list_users -q 2>/dev/null | grep -q '^guest'
}

mq_start() {
    mq_ready && return 0
    mkdir -p "$STATE" "$MQ_DIR/log" "$MQ_DIR/mnesia" && chmod 755 "$STATE"
    echo '[].' > "$MQ_DIR/enabled_plugins"
    # Loopback only: AMQP listener, distribution, and the default limits
    # of a small test broker (no disk alarm on a busy shared disk).
    cat > "$MQ_DIR/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$AMQP_PORT
disk_free_limit.absolute = 50MB
loopback_users.guest = true
EOF
    chown -R rabbitmq:rabbitmq "$MQ_DIR"
    # epmd serves the node names; started here, on loopback, before the
    # node starts its own on every interface.
    ERL_EPMD_ADDRESS=127.0.0.1 runuser -u rabbitmq -- epmd -daemon
    # In a subshell that execs, so that nothing of this script's (its
    # caller's pipes) stays open in the daemon's parents.
    # From its own directory: a broker whose working directory is deleted
    # (the caller's temporary directory) can no longer run commands.
    (cd "$MQ_DIR" && exec env "${MQ_ENV[@]}" setsid runuser -u rabbitmq -- \
        /usr/lib/rabbitmq/bin/rabbitmq-server) \
        </dev/null >"$MQ_DIR/log/startup.log" 2>&1 &
    wait_for RabbitMQ mq_ready
    echo "services.sh: RabbitMQ ready on 127.0.0.1:$AMQP_PORT"
}

mq_stop() {
    local pid
    pid=$(cat "$MQ_DIR/rabbit.pid" 2>/dev/null)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        return 0
    fi
    # rabbitmqctl shutdown when the node answers it, else SIGTERM.
    mq_ctl shutdown >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null
    wait_for 'RabbitMQ shutdown' bash -c "! kill -0 $pid"
    rm -f "$MQ_DIR/rabbit.pid"
    echo "services.sh: RabbitMQ stopped"
}

mq_vhosts() {
    local vhost
    mq_ready || die "RabbitMQ is not running"
    for vhost in "$@"; do
        case "$vhost" in
            ''|*[!A-Za-z0-9_-]*) die "bad virtual host name '$vhost'" ;;
        esac
    done
    for vhost in "$@"; do
        # A fresh one: nothing left queued from an earlier deployment.
        mq_ctl delete_vhost "$vhost" >/dev/null 2>&1
        mq_ctl add_vhost "$vhost" >/dev/null ||
            die "rabbitmqctl add_vhost $vhost failed"
        mq_ctl set_permissions -p "$vhost" guest '.*' '.*' '.*' >/dev/null ||
            die "rabbitmqctl set_permissions -p $vhost failed"
    done
}

# -- main ---------------------------------------------------------------------

action=${1:-}
if [ "$action" = vhosts ]; then
    shift
    [ "$#" -gt 0 ] || die "usage: $0 vhosts NAME..."
    mq_vhosts "$@"
    exit $?
fi
svc=${2:-all}
case "$svc" in
    all|mariadb|rabbitmq) ;;
    *) die "unknown service '$svc' (mariadb, rabbitmq, or none for both)" ;;
esac

each() {
    local fn=$1
    case "$svc" in
        all) "db_$fn" && "mq_$fn" ;;
        mariadb) "db_$fn" ;;
        rabbitmq) "mq_$fn" ;;
    esac
}

case "$action" in
    install) install ;;
    start) install && each start ;;
    stop) each stop ;;
    restart) each stop && each start ;;
    status)
        case "$svc" in
            all) db_ready >/dev/null 2>&1 && mq_ready ;;
            mariadb) db_ready >/dev/null 2>&1 ;;
            rabbitmq) mq_ready ;;
        esac
        ;;
    *) die "usage: $0 install|start|stop|restart|status [mariadb|rabbitmq] | vhosts NAME..." ;;
esac
