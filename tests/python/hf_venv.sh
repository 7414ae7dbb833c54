# Sourced by export_hf.sh and import_hf.sh (after tests/cli/lib.sh): $venv, the
# test's own virtual environment ($BP_HF_VENV, under the build folder, made with
# --system-site-packages for Debian's torch) with transformers from PyPI, made once;
# where it cannot be installed the test is skipped (exit 77) with the reason.
venv=${BP_HF_VENV:?set by ctest}
TRANSFORMERS="transformers==4.36.2" # the last line of releases that supports torch 1.13

if ! "$venv/bin/python" -c "import transformers" 2>/dev/null; then
  rm -rf "$venv"
  if ! "$BP_PYTHON" -m venv --system-site-packages "$venv" >"$WORK/venv.log" 2>&1 ||
    ! timeout 600 "$venv/bin/pip" install -q "$TRANSFORMERS" >>"$WORK/venv.log" 2>&1; then
    echo "skipped: cannot install $TRANSFORMERS from PyPI into $venv: $(tail -1 "$WORK/venv.log")"
    rm -rf "$venv"
    exit 77
  fi
fi
