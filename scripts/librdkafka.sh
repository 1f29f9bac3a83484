#!/usr/bin/env bash
# Builds librdkafka's own regression-test runner (tests/test-runner of the librdkafka source
# release that Debian ships) once per machine, into a cache outside the repository, and prints
# the directory that holds it. tests/e2e/test_librdkafka_suite.py runs tests from it against a
# gregor server.
#
# Usage: scripts/librdkafka.sh build      build unless cached; print the tests directory
#        scripts/librdkafka.sh path       print the tests directory (empty when not built)
#
# The source is Debian's librdkafka orig tarball (the upstream release, unmodified), checked
# against its SHA-256. The build needs gcc, g++, make, zlib and zstd headers; scripts/test.sh
# installs them. It takes ~5 minutes on 2 cores the first time, nothing afterwards.
set -euo pipefail

VERSION=2.8.0
SHA256=5bd1c46f63265f31c6bfcedcde78703f77d28238eadf23821c2b43fc30be3e25
URL="http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_${VERSION}.orig.tar.gz"
CACHE="${GREGOR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gregor}"
DIR="$CACHE/librdkafka-$VERSION"
TESTS="$DIR/tests"

case "${1:-}" in
  path)
    if [ -x "$TESTS/test-runner" ]; then echo "$TESTS"; fi
    exit 0
    ;;
  build) ;;
  *)
    echo "usage: $0 build|path" >&2
    exit 2
    ;;
esac

if [ -x "$TESTS/test-runner" ]; then
  echo "$TESTS"
  exit 0
fi

mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/.librdkafka-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "librdkafka $VERSION: downloading $URL" >&2
curl -sSfL -o "$work/src.tar.gz" "$URL"
echo "$SHA256  $work/src.tar.gz" | sha256sum -c --quiet - >&2
tar xzf "$work/src.tar.gz" -C "$work"
src="$work/librdkafka-$VERSION"
jobs=$(nproc 2>/dev/null || echo 2)
echo "librdkafka $VERSION: configure and build the library and tests/test-runner (a few minutes)" >&2
(
  cd "$src"
  ./configure --disable-ssl --disable-gssapi --disable-curl --disable-sasl >"$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log" >&2; exit 1; }
  make -j"$jobs" libs >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; exit 1; }
  make -j"$jobs" -C tests test-runner >"$work/make-tests.log" 2>&1 ||
    { tail -40 "$work/make-tests.log" >&2; exit 1; }
)
rm -rf "$DIR"
mv "$src" "$DIR"
echo "$TESTS"
