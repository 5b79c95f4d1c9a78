# Debian package of netlatd: `cpack -G DEB` in the build tree (after a build).
#
# Include from the top-level CMakeLists.txt after install(TARGETS netlatd ...).
# This file owns every install() rule except the daemon's own, so the package
# layout is decided in one place:
#   /usr/sbin/netlatd                         (top-level install(TARGETS))
#   /lib/systemd/system/netlatd.service, netlatd@.service, netlatd.socket
#   /etc/netlatd/netlatd.toml                 (conffile)
#   /etc/logrotate.d/netlatd                  (conffile)
#   /usr/share/man/man8/netlatd.8.gz
#   /usr/share/doc/netlatd/OUTPUT.md, REPORT.md
#   /usr/share/doc/netlatd/copyright         (machine-readable, packaging/copyright)
#   /usr/share/doc/netlatd/changelog.gz      (packaging/changelog)
#
# /etc and /lib are absolute destinations: GNUInstallDirs' SYSCONFDIR is the
# relative "etc", which under the /usr prefix of a package would become
# /usr/etc. Absolute destinations need CPACK_SET_DESTDIR (below) so CPack
# stages them under its own root instead of the build machine's /etc.
# Consequence: a plain `cmake --install` writes /etc/netlatd and
# /lib/systemd/system on the build machine; set DESTDIR to stage elsewhere.

set(NETLATD_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE PATH
    "Where the systemd units are installed (Debian 12 ships units in /lib)")
set(NETLATD_PACKAGE_MAINTAINER "netlatd maintainers <maintainers@netlatd.invalid>" CACHE STRING
    "Maintainer field of the Debian package")

install(FILES systemd/netlatd.service systemd/netlatd@.service systemd/netlatd.socket
        DESTINATION ${NETLATD_SYSTEMD_UNIT_DIR})
install(FILES configs/netlatd.toml DESTINATION /etc/netlatd)
install(FILES configs/logrotate.netlatd DESTINATION /etc/logrotate.d RENAME netlatd)

# Debian policy: man pages compressed with gzip -9n (no name or time stamp in
# the header, so the package is reproducible).
find_program(NETLATD_GZIP gzip REQUIRED)
set(NETLATD_MANPAGE_GZ ${CMAKE_CURRENT_BINARY_DIR}/man/netlatd.8.gz)
add_custom_command(OUTPUT ${NETLATD_MANPAGE_GZ}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/man
  COMMAND ${NETLATD_GZIP} -9nc ${CMAKE_CURRENT_SOURCE_DIR}/docs/netlatd.8 > ${NETLATD_MANPAGE_GZ}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/docs/netlatd.8
  COMMENT "Compressing netlatd.8")
# Debian policy 12.7: a native package (no Debian revision in its version)
# carries its changelog as changelog.gz, compressed the same way.
set(NETLATD_CHANGELOG_GZ ${CMAKE_CURRENT_BINARY_DIR}/deb-doc/changelog.gz)
add_custom_command(OUTPUT ${NETLATD_CHANGELOG_GZ}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/deb-doc
  COMMAND ${NETLATD_GZIP} -9nc ${CMAKE_CURRENT_SOURCE_DIR}/packaging/changelog > ${NETLATD_CHANGELOG_GZ}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/packaging/changelog
  COMMENT "Compressing the Debian changelog")
add_custom_target(netlatd_manpage ALL DEPENDS ${NETLATD_MANPAGE_GZ} ${NETLATD_CHANGELOG_GZ})
# The test tiers depend on the daemon; this makes a tests-only build able to
# package too.
if(TARGET netlatd)
  add_dependencies(netlatd netlatd_manpage)
endif()
install(FILES ${NETLATD_MANPAGE_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
# Debian policy 12.5: every package carries its copyright and license terms
# here, uncompressed.
install(FILES packaging/copyright ${NETLATD_CHANGELOG_GZ} DESTINATION ${CMAKE_INSTALL_DOCDIR})
# What the JSON lines hold, and what `netlatd report` makes of them.
install(FILES docs/OUTPUT.md docs/REPORT.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Maintainer scripts. dpkg does not know about systemd by itself: reload the
# unit files after install/removal and stop running instances before the
# binary goes away. The service is not enabled on install: its default
# configuration watches lo:5000, which is a starting point, not a deployment.
set(NETLATD_DEB_SCRIPTS ${CMAKE_CURRENT_BINARY_DIR}/deb)
file(MAKE_DIRECTORY ${NETLATD_DEB_SCRIPTS})
file(WRITE ${NETLATD_DEB_SCRIPTS}/conffiles
"/etc/netlatd/netlatd.toml
/etc/logrotate.d/netlatd
")
file(WRITE ${NETLATD_DEB_SCRIPTS}/postinst
"#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  if [ \"$1\" = configure ] && [ -n \"$2\" ]; then
    # Upgrade: running instances pick up the new binary.
    systemctl try-restart 'netlatd.service' 'netlatd@*.service' >/dev/null 2>&1 || true
  fi
fi
exit 0
")
file(WRITE ${NETLATD_DEB_SCRIPTS}/prerm
"#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ \"$1\" = remove ]; then
  systemctl stop 'netlatd.service' 'netlatd@*.service' >/dev/null 2>&1 || true
fi
exit 0
")
file(WRITE ${NETLATD_DEB_SCRIPTS}/postrm
"#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
")
file(CHMOD ${NETLATD_DEB_SCRIPTS}/postinst ${NETLATD_DEB_SCRIPTS}/prerm ${NETLATD_DEB_SCRIPTS}/postrm
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
file(CHMOD ${NETLATD_DEB_SCRIPTS}/conffiles
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "netlatd")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${NETLATD_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "per-stage receive latency of the Linux network stack (eBPF daemon)")
set(CPACK_PACKAGE_DESCRIPTION
"netlatd measures, for each received UDP or TCP packet on one interface and
a set of ports, the time spent in each stage of the kernel's receive path -
NIC IRQ, NET_RX softirq, netif_receive_skb, socket queue, on-CPU - up to the
application's receive call returning. BPF programs timestamp the packets;
the daemon writes per-stage latency histograms as JSON lines and can serve
them to Prometheus.")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_SET_DESTDIR ON)
# With DESTDIR staging CPack installs with CPACK_INSTALL_PREFIX, not the
# configure-time CMAKE_INSTALL_PREFIX (/usr/local by default).
set(CPACK_INSTALL_PREFIX ${CPACK_PACKAGING_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${NETLATD_PACKAGE_MAINTAINER})
# Library dependencies (libbpf, libsystemd, libfmt, ...) computed by
# dpkg-shlibdeps from the binary itself, so they match what it was linked to.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "logrotate")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${NETLATD_DEB_SCRIPTS}/conffiles ${NETLATD_DEB_SCRIPTS}/postinst
    ${NETLATD_DEB_SCRIPTS}/prerm ${NETLATD_DEB_SCRIPTS}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
