# Runs at install time (install(SCRIPT) from cmake/deploy.cmake), where CMAKE_INSTALL_PREFIX is the
# prefix of this install: `cmake --install --prefix P` or CPack's /usr, not the one configured.
# The units name the daemon and its config by absolute paths, and the config's folder is not
# under the prefix for /usr (GNUInstallDirs: /usr -> /etc), so both are worked out here rather
# than at configure time. file(INSTALL) adds $DESTDIR (CPack stages through it) and records the
# files in install_manifest.txt. Set by cmake/deploy.cmake: GPUSORT_DEPLOY_SOURCE,
# GPUSORT_DEPLOY_STAGE, GPUSORT_INSTALL_BINDIR, GPUSORT_INSTALL_SYSCONFDIR.
set(prefix "${CMAKE_INSTALL_PREFIX}")
if(IS_ABSOLUTE "${GPUSORT_INSTALL_BINDIR}")
  set(bindir "${GPUSORT_INSTALL_BINDIR}")
else()
  set(bindir "${prefix}/${GPUSORT_INSTALL_BINDIR}")
endif()
# GNUInstallDirs' rule for CMAKE_INSTALL_FULL_SYSCONFDIR, applied to this install's prefix.
if(IS_ABSOLUTE "${GPUSORT_INSTALL_SYSCONFDIR}")
  set(sysconfdir "${GPUSORT_INSTALL_SYSCONFDIR}")
elseif(prefix MATCHES "^/usr/?$")
  set(sysconfdir "/${GPUSORT_INSTALL_SYSCONFDIR}")
elseif(prefix MATCHES "^/opt/")
  set(sysconfdir "/${GPUSORT_INSTALL_SYSCONFDIR}${prefix}")
else()
  set(sysconfdir "${prefix}/${GPUSORT_INSTALL_SYSCONFDIR}")
endif()

# deploy/systemd/*: written for `cmake --install --prefix /usr/local` (README); here they get
# this install's paths.
file(MAKE_DIRECTORY "${GPUSORT_DEPLOY_STAGE}")
foreach(unit gpusortd.service gpusortd.socket)
  file(READ "${GPUSORT_DEPLOY_SOURCE}/systemd/${unit}" text)
  string(REPLACE "/usr/local/bin/gpusortd" "${bindir}/gpusortd" text "${text}")
  string(REPLACE "/etc/gpusort/gpusort.yaml" "${sysconfdir}/gpusort/gpusort.yaml" text "${text}")
  file(WRITE "${GPUSORT_DEPLOY_STAGE}/${unit}" "${text}")
  file(INSTALL "${GPUSORT_DEPLOY_STAGE}/${unit}" DESTINATION "${prefix}/lib/systemd/system"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endforeach()

# The example config, unless one is there already: an administrator's edits survive a second
# `cmake --install` (the .deb's conffile handling does the same for the package).
set(config "$ENV{DESTDIR}${sysconfdir}/gpusort/gpusort.yaml")
if(EXISTS "${config}")
  message(STATUS "Keeping: ${config} (the example is ${GPUSORT_DEPLOY_SOURCE}/gpusort.yaml)")
else()
  file(INSTALL "${GPUSORT_DEPLOY_SOURCE}/gpusort.yaml" DESTINATION "${sysconfdir}/gpusort"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()
