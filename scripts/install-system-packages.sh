#!/usr/bin/env bash
# Installs the Debian packages edgewave's tests and demo need, only where missing.
# mosquitto: the real MQTT broker the tests and the demo run.
# Java 17+: Spark (the cloud tier). chromium-headless-shell: the dashboard's browser tests.
# systemd: systemd-analyze for the agent's unit file test (no service is started).
# openssl: test certificates. python3-venv: venvs for Debian's python3.
# iproute2, nftables: the network-fault tests' namespaces, veth pairs and packet drops.
set -euo pipefail

need=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
# Debian's python3 (the Makefile's interpreter where it exists) makes venvs only with
# ensurepip, which Debian ships separately.
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1; then
  need+=(python3-venv)
fi
if ! command -v java >/dev/null 2>&1; then
  need+=(openjdk-17-jre-headless)
else
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  if [ -z "$major" ] || [ "$major" -lt 17 ]; then need+=(openjdk-17-jre-headless); fi
fi
# chromium-headless-shell: the dashboard's browser tests (Playwright drives Debian's chromium
# in its headless build, as it runs its own; tests/dashboard_data.py, EDGEWAVE_CHROMIUM).
command -v chromium-headless-shell >/dev/null 2>&1 || need+=(chromium-headless-shell)
# systemd-analyze verifies the unit `edgewave-agent install` writes (tests/integration/test_fleet_gateway.py).
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# openssl: the test certificates of the agent's TLS tests.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# ip and nft: tests/netns_rig.py puts the gateway and the cloud in network namespaces of their
# own, joined by a veth pair, and drops packets between them with nftables rules.
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need+=(iproute2)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need+=(nftables)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || echo "warning: apt-get update failed; trying with the package lists we have" >&2
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}" >&2
  if ! $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"; then
    echo "error: could not install ${need[*]}; edgewave needs mosquitto, Java 17+ for Spark, and for its tests chromium-headless-shell, systemd-analyze, openssl, iproute2 and nftables." >&2
    exit 1
  fi
fi
