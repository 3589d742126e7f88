# The .deb (issue 20, item 4): `cmake --build --preset release --target package`, or `cpack` in
# the build folder, gives gpusort_VERSION_ARCH.deb with everything `cmake --install` installs,
# for prefix /usr. `sudo apt install ./gpusort_*.deb` then makes the user and group gpusort and
# enables the socket unit (deploy/debian/postinst). Checked by tests/deploy (deploy.package).
#
# One package, programs and libraries and development files together: the libraries are small
# and a GPU host that builds against them wants the headers anyway.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpusort)
set(CPACK_PACKAGE_VENDOR "gpusort")
set(CPACK_PACKAGE_CONTACT "gpusort maintainers <maintainers@users.noreply.a-seed-0420ff28.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
    "gpusortd sorts arrays of keys (and values) larger than GPU memory on the machine's GPUs, for\n\
local clients over a Unix socket; gpusort is its command-line client and also sorts in its own\n\
process. Includes the systemd units, the example configuration, the client and engine\n\
libraries with their headers, CMake package and pkg-config files.")
# Debian's paths: /usr/bin, /usr/lib/systemd/system, and /etc for the configuration
# (cmake/install_deploy.cmake works that out from the prefix at install time). CPack installs
# with CMAKE_INSTALL_PREFIX set to this and DESTDIR to its staging folder.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The libraries the programs and libraries link (libc, libstdc++, libgomp, libprotobuf,
# libyaml-cpp) from dpkg-shlibdeps; adduser for the postinst. Not the NVIDIA driver: without a
# GPU the daemon sorts on the CPU, and the driver comes from NVIDIA's or Debian's non-free
# packages, whose names differ.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nvidia-driver")
# shlibs for the two libraries, and the ldconfig trigger that goes with them.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_STRIP_FILES ON)
# dpkg keeps an edited configuration on upgrade only for the files listed as conffiles, and
# CPack lists none by itself.
set(gpusort_conffiles "${PROJECT_BINARY_DIR}/debian/conffiles")
file(WRITE "${gpusort_conffiles}" "/${CMAKE_INSTALL_SYSCONFDIR}/gpusort/gpusort.yaml\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${gpusort_conffiles}"
    "${PROJECT_SOURCE_DIR}/deploy/debian/postinst"
    "${PROJECT_SOURCE_DIR}/deploy/debian/prerm"
    "${PROJECT_SOURCE_DIR}/deploy/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
