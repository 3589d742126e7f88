# What a system service needs besides the programs (issue 20, item 4), for `cmake --install` and
# the .deb (cmake/package.cmake):
#   lib/systemd/system/gpusortd.{service,socket}   deploy/systemd/, with this install's paths
#   lib/tmpfiles.d/gpusort.conf                    /run/gpusort at boot, for the group
#   SYSCONFDIR/gpusort/gpusort.yaml                the example config (/etc for prefix /usr)
#   MANDIR/man{1,5,8}/                             gpusort(1), gpusort.yaml(5), gpusortd(8)
#   DATAROOTDIR/bash-completion/completions/gpusort
# The paths of lib/systemd and lib/tmpfiles.d are systemd's (/usr/lib/..., /usr/local/lib/...),
# not CMAKE_INSTALL_LIBDIR, which is multiarch on Debian.
install(FILES "${PROJECT_SOURCE_DIR}/deploy/tmpfiles.d/gpusort.conf" DESTINATION lib/tmpfiles.d)
install(FILES "${PROJECT_SOURCE_DIR}/docs/man/gpusort.1" DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES "${PROJECT_SOURCE_DIR}/docs/man/gpusort.yaml.5"
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
install(FILES "${PROJECT_SOURCE_DIR}/docs/man/gpusortd.8" DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES "${PROJECT_SOURCE_DIR}/deploy/bash-completion/gpusort"
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions)
# The units and the config depend on the prefix of the install, known only then.
install(CODE "
  set(GPUSORT_DEPLOY_SOURCE \"${PROJECT_SOURCE_DIR}/deploy\")
  set(GPUSORT_DEPLOY_STAGE \"${PROJECT_BINARY_DIR}/deploy-install\")
  set(GPUSORT_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(GPUSORT_INSTALL_SYSCONFDIR \"${CMAKE_INSTALL_SYSCONFDIR}\")")
install(SCRIPT "${PROJECT_SOURCE_DIR}/cmake/install_deploy.cmake")
