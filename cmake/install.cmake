# Installs keel's libraries, headers and a CMake package so applications can
# `find_package(keel)` and link `keel::keel`.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)
