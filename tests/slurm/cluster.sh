#!/usr/bin/env bash
# A one-node SLURM cluster on loopback for the tests: munged, slurmctld and slurmd (Debian's slurm-wlm and munge),
# with a generated slurm.conf and a fake GPU GRES (two GPUs backed by /dev/null and /dev/zero), all state in DIR.
#   cluster.sh start DIR   prints the slurm.conf path (export SLURM_CONF=...) once the node is idle
#   cluster.sh stop DIR    stops the daemons started in DIR
# Runs as root (slurmd starts jobs as their user). Every daemon listens on 127.0.0.1 and ports chosen free.
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}; dir=${2:?usage: cluster.sh start|stop DIR}
mkdir -p "$dir"; dir=$(cd "$dir" && pwd)

stop() {
  for p in slurmd slurmctld munged; do
    if [ -f "$dir/$p.pid" ]; then
      pid=$(cat "$dir/$p.pid"); kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true; rm -f "$dir/$p.pid"
    fi
  done
}

fail() { echo "cluster.sh: $*" >&2; for l in munged slurmctld slurmd; do [ -f "$dir/$l.log" ] && tail -n 5 "$dir/$l.log" >&2; done; stop; exit 1; }

start() {
  [ "$(id -u)" -eq 0 ] || { echo "cluster.sh: needs root (slurmd runs jobs as their user)" >&2; exit 1; }
  for b in munged mungekey slurmctld slurmd sinfo; do
    command -v "$b" >/dev/null || { echo "cluster.sh: $b not found (apt-get install slurm-wlm munge)" >&2; exit 1; }
  done
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1 \
    || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" || fail "munged did not start"
  read -r ctl_port node_port < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
  cpus=$(nproc); mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
  cat > "$dir/slurm.conf" <<CONF
ClusterName=ael
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$node_port
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=30
GresTypes=gpu
NodeName=ael-node NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=$cpus RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  printf 'Name=gpu File=/dev/null\nName=gpu File=/dev/zero\n' > "$dir/gres.conf"
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$dir/slurm.conf" || fail "slurmctld did not start"
  slurmd -f "$dir/slurm.conf" -N ael-node || fail "slurmd did not start"
  for _ in $(seq 120); do
    state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)
    [ "$state" = idle ] && { echo "$dir/slurm.conf"; return; }
    sleep 0.5
  done
  fail "the node did not become idle (state: ${state:-none})"
}

case "$cmd" in start) start ;; stop) stop ;; *) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;; esac
