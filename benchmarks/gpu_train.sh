#!/usr/bin/env bash
# The whole loop on one GPU, in one call on a machine with an NVIDIA GPU, CuPy and JAX but no
# TensorFlow: self-play on the CUDA rules with the array net on the GPU, training with Keras
# on JAX on the same card (KERAS_BACKEND=jax), for a set number of minutes; then what a later
# run needs to go on is copied to $OUT (each file well under 16 MiB) and the loop's figures
# are printed.
#
#   benchmarks/gpu_train.sh fetch
#       here, where pip reaches PyPI and apt-get Debian's archive: the wheels the GPU machine
#       lacks (Keras and the two of its needs that the image has not, and sgfmill), for
#       Python 3.12 there, and Debian's gnugo package with the readline library it links,
#       into .whl/ (.git/info/exclude keeps .whl/ out of git; the device call carries it).
#   benchmarks/gpu_train.sh run MINUTES [bp_tree.py arguments]
#       on the GPU machine: installs the wheels, builds the extensions, runs the GPU tests,
#       then the loop for MINUTES, fewer where the call's 570 s (GPU_CALL_SECONDS) would not
#       leave time to stop and copy the results (SIGTERM then: the iteration in flight is
#       dropped, every complete one is kept). The `9x9` preset unless --preset names another, as run.sh:
#       without arguments a new run from zero; `--init-from models/9x9.npz --komi-input true
#       --komi-spread 1.5 --komi-wide-share 0.2 --handicap-share 0.1` (the README's go-on
#       command; or the model.npz brought back from an earlier call) goes on from there, as
#       a new run: its weights and place in the schedule, a fresh optimizer and replay
#       buffer; `--run DIR` names the run (default runs/gpu_train; a fresh one each call, so
#       the figures are the call's).
#   benchmarks/gpu_train.sh more MINUTES [the run call's bp_tree.py arguments]
#       on the machine a `run` call left warm (the device keeps it for seconds after a
#       call): the same run resumed where it stopped, its replay buffer, optimizer and place
#       in the schedule kept, without the tests, for MINUTES or what GPU_CALL_SECONDS
#       leaves (set it to the device time left, less a margin); the figures are this call's.
#       A fresh machine has no run to go on with: there, `run MINUTES --init-from model.npz`.
#       (The checkpoint.npz brought back is read only inside its run directory: the
#       config.json and metrics.jsonl brought back in runs/NAME/ and it as
#       runs/NAME/checkpoints/ckpt_NNNNNN.npz, NNNNNN its iteration, make a run that
#       `more M --run runs/NAME` resumes with its optimizer, counters and place in the
#       schedule, the replay buffer refilled by self-play.)
#
# While the loop trains, GNU Go plays its checkpoints on the machine's idle CPU cores (the
# call's cores but its first two, at a lower priority): `evaluate.py --follow --average-last`
# plays the mean of the run's newest GPU_AVERAGE checkpoints (fewer at a run's start: the net
# model_averaged.npz would hold then, below) against GPU_MATCH (gnugo:10; any evaluate.py
# player, such as model:models/9x9.npz for a net grown from the shipped one, or
# model:models/9x9_tenth.npz, the net shipped before it, which a GPU-trained net is to beat
# 65% (models/README.md); empty: none) in GPU_MATCH_GAMES (40) games at GPU_MATCH_SIMS (400)
# simulations a move, float32, seed GPU_MATCH_SEED (61: other openings than the CPU checks'
# 50, 51 and 0), then again with the mean up to the checkpoint newest then, and so on. Its
# lines come back in matches.log, one JSON line per match; a match still playing when the
# call must end is dropped. GNU Go is the carried Debian package, unpacked in
# /tmp/gnugo_root (its binary run through a wrapper that puts the carried readline on the
# library path); without it there are no GNU Go matches, and the loop trains alone.
#
#   benchmarks/gpu_train.sh rehearse run|more MINUTES [arguments]
#       here, on this machine's CPU, before device time is spent on it: the same call with
#       the rules and the self-play net on the CPU (--backend cpu), Keras on JAX with
#       TensorFlow blocked as the device lacks it, this checkout's .venv and build, no GPU
#       tests, and 64 games of 2,048-position iterations unless GPU_GAMES and GPU_POSITIONS
#       say otherwise, the followed matches 4 games at 16 simulations (GPU_MATCH_GAMES,
#       GPU_MATCH_SIMS) with the carried GNU Go where .whl/ holds it; the figures are the
#       CPU's, slowed by the matches beside the loop. It checks the arguments, the stop, what
#       is copied back and the figures, and that the run goes on under `more`.
#
#   benchmarks/gpu_train.sh shapes [bench_shapes.py arguments]
#       on the GPU machine: the same set-up, then benchmarks/bench_shapes.py (self-play and
#       training rates of each blocks x filters on this GPU) to choose the next net by, for
#       at most GPU_SHAPES_SECONDS (400). `run` does the same after its loop where GPU_SHAPES
#       names the shapes (10x64,10x128), for at most GPU_SHAPES_SECONDS (150 there).
#
# Every run leaves a model: run/model.npz is rewritten at each checkpoint. An iteration is
# GPU_POSITIONS positions (16,384: a few seconds of self-play), so the games in flight
# (GPU_GAMES, 512) take the trained weights every few seconds, mid-game, and the replay
# window (the preset's) spans several iterations rather than a part of one. Few games: a
# game's positions come from every net since it began, so the data's age in positions is
# about the games in flight times half a game. With 2,048 the first GPU run learnt much less
# per position, and on the CPU the same settings lost 8-72 to the preset's 128 games at equal
# positions and steps (docs/RESULTS.md, fifteenth session).
# Batches of GPU_BATCH (512) samples at the preset's learning rate: half the steps of the
# preset's 256 at the same sample reuse. On the CPU, at equal positions from zero, 512 learnt
# as 256 did and 1,024 (the second GPU run's) much less: the young net's learning is bound
# more by its steps than by their size (docs/RESULTS.md, sixteenth session).
# Figures: self-play positions/s, training samples/s, each one's share of wall time, and
# positions per GPU-minute, from the run's metrics.jsonl.
# Beside model.npz (the newest checkpoint's net) comes model_averaged.npz, the mean of the
# weights of the last GPU_AVERAGE (8) checkpoints (export_model.py --average-last; the loop
# keeps that many): where a call stops is luck, and on the CPU the mean of a run's last 8
# fitted held-out self-play better than its last checkpoint (docs/RESULTS.md, twenty-second
# session). Both are measured afterwards on the CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=(keras==3.15.1 namex==0.1.0 optree==0.20.0 sgfmill==1.1.1)
REHEARSAL=""
[ "${1:-}" = rehearse ] && REHEARSAL=cpu
if [ -n "$REHEARSAL" ]; then
    PY=${PYTHON:-.venv/bin/python}
    GAMES=${GPU_GAMES:-64}
    POSITIONS=${GPU_POSITIONS:-2048}
    MATCH_GAMES=${GPU_MATCH_GAMES:-4}
    MATCH_SIMS=${GPU_MATCH_SIMS:-16}
    # The loop cannot import TensorFlow, as on the device; nor can the followed matches.
    SCRIPT=("$PY" -c "import runpy, sys; sys.modules['tensorflow'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
else
    PY=${PYTHON:-python3}
    GAMES=${GPU_GAMES:-512}         # games in flight, for the loop and for the shapes' self-play
    POSITIONS=${GPU_POSITIONS:-16384}   # positions an iteration
    MATCH_GAMES=${GPU_MATCH_GAMES:-40}
    MATCH_SIMS=${GPU_MATCH_SIMS:-400}
    SCRIPT=("$PY")
fi
MATCH=${GPU_MATCH-gnugo:10}
BATCH=${GPU_BATCH:-512}     # training batch, for the loop and for the shapes' step
AVERAGE=${GPU_AVERAGE:-8}   # checkpoints kept and averaged into model_averaged.npz (1: none)
[[ $AVERAGE =~ ^[1-9][0-9]{0,2}$ ]] || { echo "gpu_train.sh: GPU_AVERAGE must be a whole number in 1..999, got '$AVERAGE'" >&2; exit 2; }

fetch() {
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    for wheel in "${WHEELS[@]}"; do
        python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$wheel" \
            || { echo "gpu_train.sh: could not download $wheel" >&2; exit 1; }
    done
    # This machine's Debian packages (x86-64, as the device): GNU Go, and the readline its
    # package links, which the GPU machine's image may lack (its name as gnugo's package
    # says: libreadline8 in Debian 12, libreadline8t64 later). apt-get's lists first where
    # they are missing or stale.
    rm -f .whl/*.deb
    (cd .whl && apt-get download gnugo 2>/dev/null) \
        || { apt-get update -qq && (cd .whl && apt-get download gnugo); } \
        || { echo "gpu_train.sh: could not download gnugo with apt-get" >&2; exit 1; }
    local readline
    readline=$(dpkg-deb -f .whl/gnugo_*.deb Depends | tr ',' '\n' | grep -o 'libreadline[0-9a-z]*' | head -n 1)
    [ -n "$readline" ] && { (cd .whl && apt-get download "$readline") \
        || { echo "gpu_train.sh: could not download $readline with apt-get" >&2; exit 1; }; }
    ls -l .whl
}

# The carried GNU Go (.whl/*.deb) unpacked in GNUGO_ROOT, run through a wrapper that puts the
# carried libraries first on the library path. Sets GNUGO to the wrapper where it answers GTP,
# else to nothing (then no matches are followed); what it found goes to loop.log too.
GNUGO_ROOT=/tmp/gnugo_root
carried_gnugo() {
    GNUGO=""
    [ -n "$MATCH" ] || return 0
    note() { echo "$1" | tee -a "$OUT/loop.log"; }
    rm -rf "$GNUGO_ROOT"
    ls .whl/gnugo_*.deb >/dev/null 2>&1 || { note "no GNU Go in .whl/ (gpu_train.sh fetch): no matches"; return 0; }
    local deb reply wrapper=$GNUGO_ROOT/gnugo
    mkdir -p "$GNUGO_ROOT"
    for deb in .whl/*.deb; do
        dpkg -x "$deb" "$GNUGO_ROOT" || { note "cannot unpack $deb: no matches"; return 0; }
    done
    # Debian 12 puts libraries in lib/, later ones in usr/lib/.
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib/x86_64-linux-gnu:%s/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/usr/games/gnugo "$@"\n' \
        "$GNUGO_ROOT" "$GNUGO_ROOT" "$GNUGO_ROOT" > "$wrapper"
    chmod +x "$wrapper"
    # The whole reply read, not grep -q: GNU Go writing into a pipe grep had closed would
    # die of SIGPIPE and, under pipefail, fail the check at random.
    reply=$(printf 'name\nversion\nquit\n' | "$wrapper" --mode gtp 2>&1)
    case "$reply" in
        "= GNU Go"*)
            GNUGO=$wrapper
            note "GNU Go $(echo "$reply" | sed -n 3p | tr -d '= ') carried, in $GNUGO_ROOT" ;;
        *)
            note "the carried GNU Go does not run here: no matches"
            note "$(echo "$reply" | head -n 3)" ;;
    esac
}

# What both calls need on the GPU machine: the device named, the wheels installed, Keras on
# JAX, the extensions built. Sets `started` and `stage` for the caller's stages.
setup() {
    OUT=${OUT:-/tmp/gpu_train}
    mkdir -p "$OUT"
    # The device, the carried GNU Go, then the loop's lines: one file, as $OUT brings back 8.
    : > "$OUT/loop.log"
    export PYTHONUNBUFFERED=1
    started=$(date +%s)
    stage() { echo "=== $1 (at $(( $(date +%s) - started )) s)"; }

    if [ -n "$REHEARSAL" ]; then
        # This checkout's venv and build (./build.sh); TensorFlow is blocked in the loop.
        stage "rehearsal on this machine's CPU"
        export KERAS_BACKEND=jax TF_CPP_MIN_LOG_LEVEL=2
        export JAX_COMPILATION_CACHE_DIR=/tmp/gpu_train_rehearsal_jax_cache
        carried_gnugo
        return
    fi
    stage "device"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/loop.log"
    stage "wheels"
    ls .whl/*.whl >/dev/null 2>&1 || { echo "gpu_train.sh: no .whl/ (run 'gpu_train.sh fetch' here and carry .whl)" >&2; exit 1; }
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    export KERAS_BACKEND=jax XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=2
    # JAX's compiled steps kept on the machine's disk: a `more` call there takes them up
    # again instead of compiling (the step took 5-6 s to compile on a 2-core CPU).
    export JAX_COMPILATION_CACHE_DIR=/tmp/gpu_train_jax_cache
    # JAX first (before CuPy loads CUDA), and on the GPU, or the call stops here: JAX falls
    # back to the CPU without a word when its CUDA plugin is missing.
    "$PY" -c "import jax; devices = jax.devices(); assert jax.default_backend() == 'gpu', devices; import keras, cupy; print('JAX', jax.__version__, devices, '| Keras', keras.__version__, keras.backend.backend(), '| CuPy', cupy.__version__)" \
        | tee -a "$OUT/loop.log" || { echo "gpu_train.sh: JAX, Keras or CuPy is not usable on the GPU" >&2; exit 1; }
    carried_gnugo

    stage "build"
    # The build's log comes back only when it failed: $OUT returns at most 8 files.
    "$PY" setup.py --quiet build_ext --inplace > /tmp/gpu_train_build.log 2>&1 || {
        cp /tmp/gpu_train_build.log "$OUT/build.log"; tail -20 /tmp/gpu_train_build.log
        echo "gpu_train.sh: the build failed" >&2; exit 1; }
}

# Which net the GPU can afford to train: benchmarks/bench_shapes.py on the CUDA rules and
# JAX at the loop's games, for at most SECONDS, its lines added to LOG (after a loop its
# loop.log: $OUT brings back 8 files).
time_shapes() {
    local seconds=$1 log=$2
    shift 2
    stage "bench_shapes.py $* (at most $seconds s)"
    timeout -k 10 "$seconds" "$PY" benchmarks/bench_shapes.py --backend cuda \
        --games "$GAMES" --batch "$BATCH" "$@" 2>&1 | tee -a "$log"
}

shapes() {
    MATCH=""    # no loop, no matches: GNU Go is not unpacked
    setup
    time_shapes "${GPU_SHAPES_SECONDS:-400}" "$OUT/shapes.log" "$@"
    stage "done"
}

# The GPU tests of what this loop runs on the device: the array net, the CUDA rules against
# the CPU's, self-play over both, JAX's step on the GPU against the CPU's. They took 151-165 s
# of the call whole. Left out: the 19x19 games of the 10,000-random-games check, whose CPU
# half alone takes 20 s (19x19) and 98 s (19x19 with superko) on two cores; it passed whole
# on an H200 (benchmarks/README.md), and 19x19 stays covered by the 64-game check and the
# self-play check. --durations says where the rest goes.
gpu_tests() {
    stage "GPU tests"
    local ten_thousand=tests/test_cuda_kernels.py::test_cpu_and_cuda_agree_over_10000_random_games
    timeout 180 "$PY" -m pytest -q -n 4 -p no:cacheprovider --durations=12 \
        --deselect "$ten_thousand[19-False]" --deselect "$ten_thousand[19-True]" \
        tests/test_array_net.py tests/test_cuda_kernels.py tests/test_train_backends.py 2>&1 \
        | tee "$OUT/tests.log" | grep -v "^$" | tail -30
}

# The run the loop trains: --run DIR or --run=DIR among the arguments, else runs/gpu_train.
# Sets RUN_DIR (as bp_tree.py reads it: a bare name is runs/NAME, a path is a path) and
# LOOP_ARGS (the arguments, with --run and the 9x9 preset added where they name none).
loop_arguments() {
    local name="" given i
    LOOP_ARGS=("$@")
    for ((i = 0; i < ${#LOOP_ARGS[@]}; i++)); do
        given=${LOOP_ARGS[$i]}
        case "$given" in
            --run=*) name=${given#--run=} ;;
            --run) [ $((i + 1)) -lt ${#LOOP_ARGS[@]} ] || { echo "gpu_train.sh: --run needs a directory" >&2; exit 2; }
                   name=${LOOP_ARGS[$((i + 1))]} ;;
        esac
    done
    if [ -z "$name" ]; then
        name=runs/gpu_train
        LOOP_ARGS=(--run "$name" "${LOOP_ARGS[@]}")
    fi
    case " ${LOOP_ARGS[*]} " in *" --preset "*|*" --preset="*) ;; *) LOOP_ARGS=(--preset 9x9 "${LOOP_ARGS[@]}") ;; esac
    case "$name" in */*|.*) RUN_DIR=$name ;; *) RUN_DIR=runs/$name ;; esac
}

# The followed matches (the header's GPU_MATCH): evaluate.py --follow on the run, once its
# trainer has taken the run (a `more` call's run has checkpoints already: the first match
# plays the one the last call left), on all cores but two where there are four or more, at
# a lower priority than the loop, to $OUT/matches.log. Sets FOLLOWER to its PID, or nothing.
follow_matches() {
    FOLLOWER=""
    [ -n "$MATCH" ] || return 0
    case "$MATCH" in
        gnugo:*) [ -n "$GNUGO" ] || { echo "gpu_train.sh: no GNU Go: no matches beside the loop"; return 0; } ;;
    esac
    # The cores this call may run on, less the first two (a cpuset need not start at 0).
    local cores pin=() before=""
    cores=$("$PY" -c "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0))[2:])))")
    [ "$(echo "$cores" | tr ',' '\n' | grep -c .)" -ge 2 ] && command -v taskset >/dev/null \
        && pin=(taskset -c "$cores")
    # The trainer's PID, once this call's trainer has written it over the last call's.
    [ -e "$RUN_DIR/trainer.lock" ] && before=$(cat "$RUN_DIR/trainer.lock")
    (
        for _ in $(seq 120); do
            [ -s "$RUN_DIR/trainer.lock" ] && [ "$(cat "$RUN_DIR/trainer.lock")" != "$before" ] && break
            sleep 1
        done
        # It plays on the CPU alone: no CUDA context of its own on the loop's card.
        CUDA_VISIBLE_DEVICES="" exec nice -n 10 "${pin[@]}" "${SCRIPT[@]}" evaluate.py --run "$RUN_DIR" \
            --black ckpt:latest --white "$MATCH" --games "$MATCH_GAMES" \
            --sims "$MATCH_SIMS" --parallel "$MATCH_GAMES" --seed "${GPU_MATCH_SEED:-61}" \
            --inference float32 ${GNUGO:+--gnugo "$GNUGO"} --follow --average-last "$AVERAGE"
    ) > "$OUT/matches.log" 2>&1 &
    FOLLOWER=$!
    echo "matches beside the loop: the mean of the last $AVERAGE checkpoints against $MATCH, $MATCH_GAMES games at $MATCH_SIMS simulations (PID $FOLLOWER${pin:+, cores $cores})"
}

# After the loop: the follower plays on (the run's last checkpoint, if it has not yet) for
# GPU_MATCH_AFTER seconds (30: the GPU idles meanwhile), or less where the call's budget
# would not leave time for the rest, then SIGTERM drops the match in flight.
end_matches() {
    [ -n "$FOLLOWER" ] || return 0
    local deadline=$((started + ${GPU_CALL_SECONDS:-570} - 20)) after
    [ -n "${GPU_SHAPES:-}" ] && deadline=$((deadline - ${GPU_SHAPES_SECONDS:-150}))
    after=$(($(date +%s) + ${GPU_MATCH_AFTER:-30}))
    [ "$after" -lt "$deadline" ] && deadline=$after
    stage "the matches: until the follower ends, or at most $((deadline - $(date +%s))) s"
    while kill -0 "$FOLLOWER" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
    kill -TERM "$FOLLOWER" 2>/dev/null
    # Its stop closes its GNU Go processes, 40 of them at most; past 10 s they are left to
    # end on their closed input.
    for _ in $(seq 10); do kill -0 "$FOLLOWER" 2>/dev/null || break; sleep 1; done
    kill -KILL "$FOLLOWER" 2>/dev/null
    wait "$FOLLOWER" 2>/dev/null
    grep "^evaluate: " "$OUT/matches.log" | tail -n 3
    "$PY" - "$OUT/matches.log" <<'EOF'
import json, sys
matches = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
for m in matches:
    positions = f"{m['positions']:,}" if m["positions"] is not None else "?"
    span = m.get("averaged") or [m["iteration"]]
    played = (f"checkpoint {span[0]}" if len(span) == 1 else
              f"the mean of checkpoints {span[0]}-{span[-1]}")
    print(f"{played} ({positions} positions) against {m['player_b']} at "
          f"{m['simulations']} simulations: {m['wins'] + m['draws'] / 2:g}/{m['games']} = "
          f"{m['win_rate']:.1%} (95% {m['low']:.1%}-{m['high']:.1%})")
if not matches:
    print("no match was completed")
EOF
}

# The run's newest checkpoint (ckpt_NNNNNN.npz, numbered so that names sort as iterations),
# or nothing.
newest_checkpoint() {
    ls "$RUN_DIR"/checkpoints/ckpt_*.npz 2>/dev/null | tail -n 1
}

# The loop for MINUTES with LOOP_ARGS, then its model, newest checkpoint, metrics and config
# copied to $OUT and the figures of this call's iterations printed.
train() {
    local minutes=$1
    # The loop gets MINUTES, or less where the call's budget (GPU_CALL_SECONDS, 570 of the
    # device's 600) would not leave time to stop, copy the results and time GPU_SHAPES: a
    # call killed at its limit brings back no model. SIGTERM stops it (the iteration in
    # flight is dropped); SIGKILL 30 s later if the stop hangs.
    local reserve=40 loop_seconds
    [ -n "${GPU_SHAPES:-}" ] && reserve=$((reserve + ${GPU_SHAPES_SECONDS:-150}))
    loop_seconds=$(( ${GPU_CALL_SECONDS:-570} - ($(date +%s) - started) - reserve ))
    [ "$loop_seconds" -gt $((minutes * 60)) ] && loop_seconds=$((minutes * 60))
    [ "$loop_seconds" -ge 60 ] || { echo "gpu_train.sh: $loop_seconds s left for the loop; not started" >&2; exit 1; }
    # The iteration the run resumes after (a run gone on with by `more`: its newest
    # checkpoint's; a metrics line after it is dropped on resume), so that the figures are
    # this call's iterations.
    local before=0 newest
    newest=$(newest_checkpoint)
    [ -n "$newest" ] && before=$((10#$(basename "$newest" .npz | sed 's/^ckpt_//')))
    stage "the loop for $loop_seconds s: bp_tree.py ${LOOP_ARGS[*]}"
    local loop=("${SCRIPT[@]}" bp_tree.py --backend "${REHEARSAL:-cuda}")
    follow_matches
    # The match against random plays on the CPU (7.5 s a match on the H200's machine): every
    # 10th of the preset's 2.5 s iterations, it took 20% of the loop's wall time.
    timeout -k 30 -s TERM "${loop_seconds}s" "${loop[@]}" --gnugo-every 0 \
        --num-games "$GAMES" --positions-per-iteration "$POSITIONS" \
        --train-batch-size "$BATCH" --checkpoints-to-keep "$((AVERAGE > 3 ? AVERAGE : 3))" \
        --random-every "${GPU_RANDOM_EVERY:-100}" "${LOOP_ARGS[@]}" 2>&1 | tee -a "$OUT/loop.log"
    echo "bp_tree.py: status ${PIPESTATUS[0]} (124: the time limit stopped it, as planned)"

    stage "results"
    for file in model.npz metrics.jsonl config.json; do
        [ -f "$RUN_DIR/$file" ] && cp "$RUN_DIR/$file" "$OUT/"
    done
    newest=$(newest_checkpoint)
    [ -n "$newest" ] && cp "$newest" "$OUT/checkpoint.npz"
    # The mean of the last AVERAGE checkpoints (a `more` call's run holds the last call's
    # too); a run with fewer, or grown by its schedule among them, leaves none, with its line.
    # A `run` call's $OUT then holds the 8 files it brings back: loop.log, tests.log,
    # matches.log, model.npz, model_averaged.npz, checkpoint.npz, metrics.jsonl, config.json.
    rm -f "$OUT/model_averaged.npz"
    [ "$AVERAGE" -gt 1 ] && [ -n "$newest" ] && "${SCRIPT[@]}" export_model.py --run "$RUN_DIR" \
        --average-last "$AVERAGE" --output "$OUT/model_averaged.npz"
    ls -l "$OUT"
    "$PY" - "$RUN_DIR/metrics.jsonl" "$before" <<'EOF'
import json, sys
try:
    records = [json.loads(line) for line in open(sys.argv[1])]
except OSError:
    sys.exit("no metrics.jsonl: no iteration completed")
before = int(sys.argv[2])
mine = [r for r in records if r["iteration"] > before]
if not mine:
    sys.exit("no iteration completed in this call")
# The run's counters are cumulative: this call's share is the difference from the iteration
# it resumed after.
start = next((r for r in records if r["iteration"] == before),
             {"wall_time_s": 0.0, "positions": 0})
wall = mine[-1]["wall_time_s"] - start["wall_time_s"]
positions = mine[-1]["positions"] - start["positions"]
selfplay = sum(r["selfplay_seconds"] for r in mine)
training = sum(r["train_seconds"] for r in mine)
samples = sum(r["train_samples_per_s"] * r["train_seconds"] for r in mine)
print(f"iterations {len(mine)} (to {mine[-1]['iteration']}), positions {positions:,} "
      f"(the run's {mine[-1]['positions']:,}), wall {wall:.0f} s, "
      f"net {mine[-1].get('schedule_position', 0):,} positions into its schedule")
moves = sum(r.get("selfplay_positions_per_s", 0) * r["selfplay_seconds"] for r in mine)
print(f"self-play {positions / max(selfplay, 1e-9):,.0f} kept positions/s "
      f"({moves / max(selfplay, 1e-9):,.0f} moves/s with the fast searches), "
      f"{selfplay / wall:.0%} of wall time; training {samples / max(training, 1e-9):,.0f} "
      f"samples/s ({training / wall:.0%} of wall time)")
print(f"positions per GPU-minute of the loop: {positions / (wall / 60):,.0f}")
EOF
    # The model is home; the rest of the call's minutes finish the match in flight and time
    # the candidate nets.
    end_matches
    [ -n "${GPU_SHAPES:-}" ] && time_shapes "${GPU_SHAPES_SECONDS:-150}" "$OUT/loop.log" --shapes "$GPU_SHAPES"
    stage "done"
}

run() {
    local minutes=${1:?"gpu_train.sh run MINUTES [bp_tree.py arguments]"}
    shift
    loop_arguments "$@"
    setup
    [ -n "$REHEARSAL" ] || gpu_tests
    # A fresh run each call (a warm machine keeps ignored folders between calls), so the
    # figures are this call's.
    if [ -e "$RUN_DIR" ]; then
        echo "gpu_train.sh: removing the earlier $RUN_DIR (each run call trains a run of its own)"
        rm -rf "$RUN_DIR"
    fi
    train "$minutes"
}

# On the machine `run` left warm: the same run resumed where it stopped (its replay buffer,
# optimizer and place in the schedule), without the tests, which passed in that call.
more() {
    local minutes=${1:?"gpu_train.sh more MINUTES [the run call's bp_tree.py arguments]"}
    shift
    loop_arguments "$@"
    [ -n "$(newest_checkpoint)" ] || {
        echo "gpu_train.sh: $RUN_DIR has no checkpoint to go on from (a fresh machine?): use run MINUTES --init-from the model.npz brought back" >&2
        exit 2; }
    setup
    train "$minutes"
}

case "${1:-}" in
    fetch) fetch ;;
    run) shift; run "$@" ;;
    more) shift; more "$@" ;;
    shapes) shift; shapes "$@" ;;
    rehearse)
        case "${2:-}" in
            run) shift 2; run "$@" ;;
            more) shift 2; more "$@" ;;
            *) echo "usage: benchmarks/gpu_train.sh rehearse run|more MINUTES [bp_tree.py arguments]" >&2; exit 2 ;;
        esac ;;
    *) echo "usage: benchmarks/gpu_train.sh fetch | run MINUTES [bp_tree.py arguments] | more MINUTES [the same] | shapes [bench_shapes.py arguments] | rehearse run|more MINUTES [...]" >&2; exit 2 ;;
esac
