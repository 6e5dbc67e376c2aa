# Thin wrapper: the two commands of the README's quick start.
#   make demo   install what is missing, build, verify every mode this machine can run, print the table
#   make test   install what is missing, build, run every test this machine can run (what CI runs)
.PHONY: demo test build deps clean

BUILD ?= build
FIVEFOLD = $(BUILD)/fivefold

deps:
	@bash ci/deps.sh

build: deps
	@cmake --preset default >/dev/null || cmake --preset default
	@cmake --build --preset default -j 2

test:
	@bash ci/cpu

demo: build
	@bash ci/demo $(FIVEFOLD)

clean:
	rm -rf build build-cpu build-debug build-gpu
