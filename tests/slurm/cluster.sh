#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for the SLURM executor test (tests/integration/test_slurm.py).
#
#   tests/slurm/cluster.sh install   install Debian's slurm-wlm and munge (root + apt-get only)
#   tests/slurm/cluster.sh start     write a one-node slurm.conf under $QUALFLOW_SLURM_DIR, start munged,
#                                    slurmctld and slurmd, wait until the node is idle; prints the
#                                    SLURM_CONF line to export
#   tests/slurm/cluster.sh stop      stop what `start` started (by the pids it recorded), nothing else
#   tests/slurm/cluster.sh env       print `export SLURM_CONF=...`
#
# The configuration and state live under $QUALFLOW_SLURM_DIR (default /tmp/qualflow-slurm);
# /etc/slurm/slurm.conf becomes a symlink to it when there is none (job steps started inside an
# allocation do not see a SLURM_CONF exported at submission), and `stop` removes only that symlink.
# An existing /etc/slurm/slurm.conf that is not ours is never touched: then `start` refuses.
# Exit status 3 means "SLURM cannot be set up here", with the reason on stderr (the test skips and
# prints it).
set -euo pipefail

DIR="${QUALFLOW_SLURM_DIR:-/tmp/qualflow-slurm}"
CONF="$DIR/slurm.conf"
CTLD_PORT="${QUALFLOW_SLURMCTLD_PORT:-6817}"
SLURMD_PORT="${QUALFLOW_SLURMD_PORT:-6818}"

cannot() { echo "cluster.sh: $*" >&2; exit 3; }

have_binaries() { command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
  && command -v sbatch >/dev/null && command -v squeue >/dev/null; }

install() {
  have_binaries && return 0
  command -v apt-get >/dev/null 2>&1 || cannot "slurm-wlm/munge not installed and no apt-get here"
  [ "$(id -u)" = 0 ] || cannot "slurm-wlm/munge not installed and not root (cannot apt-get install)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null) \
    || cannot "apt-get install slurm-wlm munge failed"
  have_binaries || cannot "slurm-wlm installed but slurmctld/slurmd/munged/sbatch not on PATH"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  have_binaries || install
  [ "$(id -u)" = 0 ] || cannot "slurmd must run as root to start jobs (not root here)"
  mkdir -p "$DIR"/{state,spool,log,munge}
  local host cpus mem
  host="$(hostname -s)"
  cpus="$(nproc --all)"   # the node's cores, not this process's affinity
  # slurmd -C reports what this node has; leave 1 GiB for the system
  mem="$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
  mem="$(( ${mem:-4096} > 2048 ? ${mem:-4096} - 1024 : ${mem:-4096} ))"
  cat > "$CONF" <<EOF
# one-node cluster for qualflow's SLURM test (tests/slurm/cluster.sh)
ClusterName=qualflow
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# squeue is the status command here (no accounting): keep finished jobs visible for it
MinJobAge=300
KillWait=30
SlurmdTimeout=60
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  # munge: the Debian package made /etc/munge/munge.key at install; make one if it is missing
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile /etc/munge/munge.key >/dev/null 2>&1 || cannot "no munge key and mungekey failed"
  fi
  if ! alive "$DIR/munged.pid"; then
    munged --force --socket "$DIR/munge/munge.socket" --pid-file "$DIR/munged.pid" \
      --log-file "$DIR/log/munged.log" --seed-file "$DIR/munge/munged.seed" \
      || cannot "munged did not start (see $DIR/log/munged.log)"
  fi
  # slurm finds munged's socket through its AuthInfo
  sed -i "s|^AuthType=auth/munge|AuthType=auth/munge\nAuthInfo=socket=$DIR/munge/munge.socket|" "$CONF"
  if [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" != "$CONF" ]; then
    [ -e /etc/slurm/slurm.conf ] && cannot "/etc/slurm/slurm.conf exists and is not ours (a real cluster config?)"
    mkdir -p /etc/slurm && ln -s "$CONF" /etc/slurm/slurm.conf
  fi
  export SLURM_CONF="$CONF"
  alive "$DIR/slurmctld.pid" || slurmctld -f "$CONF" -i || cannot "slurmctld did not start (see $DIR/log/slurmctld.log)"
  alive "$DIR/slurmd.pid" || slurmd -f "$CONF" -N "$host" || cannot "slurmd did not start (see $DIR/log/slurmd.log)"
  local i
  for i in $(seq 60); do
    if sinfo -h -N -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "export SLURM_CONF=$CONF"
      return 0
    fi
    [ "$i" = 10 ] && scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true
    sleep 1
  done
  sinfo -N -l >&2 || true
  tail -5 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
  cannot "the node did not become idle within 60 s"
}

stop() {
  local name pidfile pid
  for name in slurmd slurmctld munged; do
    pidfile="$DIR/$name.pid"
    if alive "$pidfile"; then
      pid="$(cat "$pidfile")"
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" || true
    fi
    rm -f "$pidfile"
  done
  # forget job state, so the next start begins with an empty queue
  rm -rf "$DIR/state" "$DIR/spool"
  [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$CONF" ] && rm -f /etc/slurm/slurm.conf || true
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 install|start|stop|env" >&2; exit 2 ;;
esac
