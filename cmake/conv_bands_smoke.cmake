# Smoke test of bench/conv_bands (run by CTest with cmake -P):
#   cmake -DBUILD_DIR=build -DBIN=build/bench/conv_bands "-DARGS=1;1;conv5" [-DEXPECT_EXIT=2
#         -DEXPECT_MSG=text] -P cmake/conv_bands_smoke.cmake
# Builds the EXCLUDE_FROM_ALL target, runs it with ARGS and checks its report. With EXPECT_EXIT it
# checks instead that the run is refused with that exit code and a message containing EXPECT_MSG.
foreach(v BUILD_DIR BIN ARGS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "conv_bands_smoke: -D${v}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target conv_bands RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "conv_bands_smoke: building target conv_bands failed (exit ${rc}):\n${out}")
endif()

execute_process(COMMAND ${BIN} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REPLACE ";" " " cmd "${BIN} ${ARGS}")
message("${out}${err}")

if(DEFINED EXPECT_EXIT)
  if(NOT rc STREQUAL "${EXPECT_EXIT}")
    message(FATAL_ERROR "conv_bands_smoke: '${cmd}' exited ${rc}, expected ${EXPECT_EXIT}")
  endif()
  string(FIND "${err}" "${EXPECT_MSG}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "conv_bands_smoke: stderr does not say '${EXPECT_MSG}'")
  endif()
  return()
endif()

if(NOT rc EQUAL 0)
  message(FATAL_ERROR "conv_bands_smoke: '${cmd}' exited ${rc}, expected 0")
endif()
set(fail "")
if(NOT out MATCHES "conv[1-5]  C=[0-9]+ H=[0-9]+ W=[0-9]+ -> K=[0-9]+ Ho=[0-9]+ Wo=[0-9]+  n=[0-9]+\n")
  string(APPEND fail "no layer header line; ")
endif()
if(NOT out MATCHES "full map FNV-1a [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]")
  string(APPEND fail "no full-map FNV-1a digest; ")
endif()
foreach(P 1 2 4 8)
  # e.g. "  P=4  bands of 3..4 rows: 1.234 ns/MAC (sum 5.6 ms, slowest band 1.5 ms)"
  if(NOT out MATCHES "  P=${P}  bands of [0-9]+\\.\\.[0-9]+ rows: ([0-9]+\\.[0-9]+) ns/MAC")
    string(APPEND fail "no ns/MAC line for P=${P}; ")
  elseif(CMAKE_MATCH_1 EQUAL 0 OR CMAKE_MATCH_1 GREATER 1000000)
    string(APPEND fail "P=${P}: ${CMAKE_MATCH_1} ns/MAC is not a plausible time; ")
  endif()
endforeach()
if(NOT out MATCHES "\nbands bit-identical to full map\n")
  string(APPEND fail "the bands are not reported bit-identical to the full map; ")
endif()
if(fail)
  message(FATAL_ERROR "conv_bands_smoke: ${fail}")
endif()
message("conv_bands_smoke: report complete, bands bit-identical")
