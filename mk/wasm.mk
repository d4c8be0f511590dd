# The lab's WebAssembly kernels (docs/lab.md, "The two paths"): wasm/lab_kernels.ts, built by
# AssemblyScript (pinned in package.json, installed by npm ci) with the options in
# wasm/asconfig.json into src/normdive/web/static/lab/kernels.wasm. The .wasm is committed, so
# `make run` needs no compiler; tests/test_lab_kernels_build.py fails when it is not the build
# of its source.

LAB_WASM := src/normdive/web/static/lab/kernels.wasm

.PHONY: wasm

wasm: node_modules/.installed
	node_modules/.bin/asc wasm/lab_kernels.ts --config wasm/asconfig.json --target release \
	  -o $(LAB_WASM)
