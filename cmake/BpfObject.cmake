# Compiles one bpf/*.bpf.c into a BPF object with clang, CO-RE against a
# vmlinux.h, and wraps it in a libbpf skeleton header (bpftool gen skeleton).
# Produces an INTERFACE target that puts <name>.skel.h on the include path.

find_program(NETLATD_CLANG NAMES clang clang-19 clang-16 clang-14 REQUIRED)
find_program(NETLATD_BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
# The skeleton embeds the object without its DWARF (the verifier's line info
# is in .BTF.ext, which stays): 0.7 MB instead of 1.6 MB in the daemon.
find_program(NETLATD_LLVM_STRIP NAMES llvm-strip llvm-strip-19 llvm-strip-16 llvm-strip-14)

set(NETLATD_BPF_GEN ${CMAKE_BINARY_DIR}/bpf)
file(MAKE_DIRECTORY ${NETLATD_BPF_GEN})

if(NETLATD_VMLINUX_H)
  set(NETLATD_VMLINUX_HEADER ${NETLATD_VMLINUX_H})
else()
  set(NETLATD_VMLINUX_HEADER ${NETLATD_BPF_GEN}/vmlinux.h)
  if(NOT EXISTS ${NETLATD_VMLINUX_BTF})
    message(FATAL_ERROR "no BTF at ${NETLATD_VMLINUX_BTF}: the kernel lacks CONFIG_DEBUG_INFO_BTF. "
                        "Point -DNETLATD_VMLINUX_BTF at a BTF blob or -DNETLATD_VMLINUX_H at a vmlinux.h.")
  endif()
  add_custom_command(OUTPUT ${NETLATD_VMLINUX_HEADER}
    COMMAND ${NETLATD_BPFTOOL} btf dump file ${NETLATD_VMLINUX_BTF} format c > ${NETLATD_VMLINUX_HEADER}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${NETLATD_VMLINUX_HEADER}.tmp ${NETLATD_VMLINUX_HEADER}
    COMMENT "Generating vmlinux.h from ${NETLATD_VMLINUX_BTF}"
    VERBATIM)
endif()
# A custom command's output is a rule only in its own directory: objects built
# in others (bench/, tests/vm/) order themselves after this target instead, or
# a build of one of them alone finds no rule for vmlinux.h.
add_custom_target(netlatd_vmlinux DEPENDS ${NETLATD_VMLINUX_HEADER})

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|amd64")
  set(NETLATD_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(NETLATD_BPF_ARCH arm64)
else()
  set(NETLATD_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()

function(netlatd_bpf_skeleton target source)
  get_filename_component(stem ${source} NAME_WE)
  set(obj ${NETLATD_BPF_GEN}/${stem}.bpf.o)
  set(skel ${NETLATD_BPF_GEN}/${stem}.skel.h)
  # Every header of bpf/, in its folders, and the plain-C ones it shares with
  # src/: an edit of any of them rebuilds the object and the skeleton.
  file(GLOB_RECURSE bpf_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bpf/*.h)
  add_custom_command(OUTPUT ${obj}
    COMMAND ${NETLATD_CLANG} -target bpf -g -O2 -Wall -Wextra -Wno-unused-parameter -Werror
            -mcpu=v3 -D__TARGET_ARCH_${NETLATD_BPF_ARCH}
            -I${NETLATD_BPF_GEN} -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/bpf
            -idirafter /usr/include/x86_64-linux-gnu
            -c ${source} -o ${obj}
    DEPENDS ${source} ${bpf_headers} ${NETLATD_VMLINUX_HEADER} ${CMAKE_SOURCE_DIR}/include/netlatd/abi.h
            ${CMAKE_SOURCE_DIR}/include/netlatd/stage_math.h
    COMMENT "Compiling BPF object ${stem}.bpf.o"
    VERBATIM)
  if(NETLATD_LLVM_STRIP)
    set(embedded ${NETLATD_BPF_GEN}/${stem}.bpf.stripped.o)
    add_custom_command(OUTPUT ${embedded}
      COMMAND ${NETLATD_LLVM_STRIP} -g ${obj} -o ${embedded}
      DEPENDS ${obj}
      COMMENT "Stripping DWARF from ${stem}.bpf.o for the skeleton"
      VERBATIM)
  else()
    set(embedded ${obj})
  endif()
  add_custom_command(OUTPUT ${skel}
    COMMAND ${NETLATD_BPFTOOL} gen skeleton ${embedded} name ${stem}_bpf > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${embedded}
    COMMENT "Generating skeleton ${stem}.skel.h"
    VERBATIM)
  add_custom_target(${target}_gen DEPENDS ${skel})
  add_dependencies(${target}_gen netlatd_vmlinux)
  add_library(${target} INTERFACE)
  add_dependencies(${target} ${target}_gen)
  target_include_directories(${target} INTERFACE ${NETLATD_BPF_GEN})
  set_property(GLOBAL PROPERTY NETLATD_BPF_OBJECT ${obj})
endfunction()
