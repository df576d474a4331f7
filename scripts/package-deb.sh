#!/usr/bin/env bash
# Builds the Debian package of the extension for the machine's PostgreSQL 15:
#
#     scripts/package-deb.sh [OUT_DIR]      (default: target/deb)
#
# writes OUT_DIR/kafgres_<version>-pg15_<arch>.deb, package postgresql-15-kafgres:
# what `cargo pgrx package` lays out (the library, the control file, the
# install and upgrade scripts) plus the first release's full script, which
# the upgrade test installs. It depends on postgresql-15 and the C runtime
# only: `apt install ./kafgres_*.deb` needs no Rust. Needs the build
# toolchain of `./kafgres start` (cargo-pgrx, libclang) on the building machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/target/deb}
PG_MAJOR=15
PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
export PATH=$HOME/.cargo/bin:$PATH

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)
arch=$(dpkg --print-architecture)
[ -n "$version" ] || { echo "package-deb: no version in $ROOT/Cargo.toml" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
(cd "$ROOT/crates/kafgres" && cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$stage/root" >"$stage/build.log" 2>&1) ||
    { tail -n 40 "$stage/build.log" >&2; echo "package-deb: cargo pgrx package failed" >&2; exit 1; }
# Debug info is most of the build's size; the package ships without it.
strip --strip-unneeded "$stage/root$("$PG_CONFIG" --pkglibdir)/kafgres.so"
extension_dir=$stage/root$("$PG_CONFIG" --sharedir)/extension
install -m 644 "$ROOT/crates/kafgres/sql/kafgres--0.1.0.sql" "$extension_dir/"
doc_dir=$stage/root/usr/share/doc/postgresql-$PG_MAJOR-kafgres
install -d "$doc_dir"
install -m 644 "$ROOT/README.md" "$doc_dir/README.md"
install -m 644 "$ROOT/docs/operations.md" "$doc_dir/operations.md"

installed_kib=$(du -sk "$stage/root" | cut -f1)
install -d "$stage/root/DEBIAN"
cat >"$stage/root/DEBIAN/control" <<CONTROL
Package: postgresql-$PG_MAJOR-kafgres
Version: $version
Architecture: $arch
Maintainer: Kafgres developers <kafgres@localhost>
Depends: postgresql-$PG_MAJOR, libc6, libgcc-s1
Section: database
Priority: optional
Installed-Size: $installed_kib
Description: Kafka-compatible broker inside PostgreSQL $PG_MAJOR
 Kafgres runs a Kafka-compatible broker in a background worker of PostgreSQL:
 Kafka clients connect to it, and SQL sends and consumes records inside its
 own transactions. Add kafgres to shared_preload_libraries, restart, and run
 CREATE EXTENSION kafgres (or ALTER EXTENSION kafgres UPDATE after an upgrade).
CONTROL

mkdir -p "$OUT"
deb=$OUT/kafgres_${version}-pg${PG_MAJOR}_${arch}.deb
dpkg-deb --root-owner-group --build "$stage/root" "$deb" >/dev/null
echo "$deb"
