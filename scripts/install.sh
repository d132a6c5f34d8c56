#!/usr/bin/env bash
# Install what Assay needs on a fresh Debian/Ubuntu machine, idempotently.
#
#   scripts/install.sh service   bubblewrap + a virtualenv (.venv) with the service
#   scripts/install.sh test      the above + trainer, Ray and test dependencies
#
# Environment: ASSAY_VENV (default .venv in the repository); ASSAY_TOOLCHAINS=0 leaves out
# the code verifier's compilers (C, C++, Java, JavaScript, Go, Rust; docs/languages.md).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-service}"
VENV="${ASSAY_VENV:-$PWD/.venv}"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v setpriv >/dev/null || missing+=(util-linux)
# Debian splits venv/ensurepip out of python3.
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
# The proof verifier reads Debian's Metamath databases; tests cross-check with its `metamath`.
[ -f /usr/share/metamath/databases/set.mm ] || missing+=(metamath-databases)
if [ "$what" = test ]; then command -v metamath >/dev/null || missing+=(metamath); fi
# The Ray tests run their cluster in a private network namespace (unshare, nsenter, ip).
if [ "$what" = test ]; then
  command -v ip >/dev/null || missing+=(iproute2)
fi
# The code verifier's toolchains (docs/languages.md); ASSAY_TOOLCHAINS=0 skips them.
if [ "${ASSAY_TOOLCHAINS:-1}" != 0 ]; then
  [ -x /usr/bin/g++ ] || missing+=(gcc g++)
  [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/javac ] || missing+=(openjdk-17-jdk-headless)
  [ -x /usr/bin/node ] || missing+=(nodejs)
  [ -x /usr/lib/go/pkg/tool/linux_amd64/compile ] || missing+=(golang-go)
  [ -x /usr/bin/rustc ] || missing+=(rustc)
fi
apt_install() {
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq -o DPkg::Lock::Timeout=600 "$@" >/dev/null
}
if [ ${#missing[@]} -gt 0 ]; then
  echo "install.sh: installing ${missing[*]}" >&2
  # The package lists a run before this one fetched are used as they are; fetched again
  # only when they cannot serve the install (none yet, or stale).
  apt_install "${missing[@]}" 2>/dev/null || { as_root apt-get update -qq && apt_install "${missing[@]}"; }
fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
fi
extras="service"
if [ "$what" = test ]; then
  extras="service,trainer,ray,test"
fi
"$VENV/bin/python" -m pip install -q -e ".[${extras}]"
