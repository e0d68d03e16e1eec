# Sourced by the A/B scripts (engine_ab.sh, server_ab.sh, http_ab.sh) after device_env.sh: unpacks
# the older tree's `git archive` OLD_TAR (plain or gzipped) into a fresh OLD, makes OUT, and sets
# SITE, the import path of the carried wheels without this tree's src/: a side runs with
# PYTHONPATH="${SITE}<its tree>/src". Needs ROOT, OLD_TAR, OLD and OUT.
rm -rf "$OLD" && mkdir -p "$OLD" "$OUT" && tar -xf "$OLD_TAR" -C "$OLD" || return 1
SITE=${PYTHONPATH:+$PYTHONPATH:}
SITE=${SITE//$ROOT\/src:/}
