# NETLATD_SANITIZE=address,undefined | thread instruments every C/C++ target
# (not the BPF object, which clang builds for another target). NETLATD_FUZZ
# adds libFuzzer's coverage instrumentation for the harnesses of tests/fuzz.
if(NETLATD_SANITIZE)
  if(NETLATD_SANITIZE MATCHES "thread" AND NETLATD_SANITIZE MATCHES "address")
    message(FATAL_ERROR "NETLATD_SANITIZE: thread cannot be combined with address; use two build directories")
  endif()
  # -fno-sanitize-recover: a finding ends the program, so a report that no
  # test reads (a daemon's stderr in a temporary directory) still fails it.
  add_compile_options(-fsanitize=${NETLATD_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${NETLATD_SANITIZE})
endif()

if(NETLATD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "NETLATD_FUZZ needs clang (libFuzzer): configure with CXX=clang++ CC=clang")
  endif()
  # The library gets coverage counters; only the harnesses link libFuzzer's main().
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
