# Installs keel's libraries, headers and a CMake package, so an application
# can `find_package(keel)` and link `keel::keel` (every layer) or one layer
# (`keel::keel_messages`, ...).
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(KEEL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/keel)
set(_keel_layers)
foreach(lib keel_messages keel_storage keel_supervision keel_models keel_core keel_net
    keel_data_plane keel_faults keel_ps keel_job keel_cluster keel_metrics keel_chaos keel_actors)
  if(TARGET ${lib})
    list(APPEND _keel_layers ${lib})
  endif()
endforeach()

add_library(keel_all INTERFACE)
target_link_libraries(keel_all INTERFACE ${_keel_layers})
set_target_properties(keel_all PROPERTIES EXPORT_NAME keel)
add_library(keel::keel ALIAS keel_all)

install(TARGETS ${_keel_layers} keel_all EXPORT keel-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/keel)
# Only the public API is installed: <keel/keel.hpp> and the headers it
# includes, none of which names an implementation type (actors, capnp
# schemas, storage, supervision stay inside the libraries).
# tests/embedding_check.sh builds an application against exactly these.
set(KEEL_PUBLIC_HEADERS
  actors/job/job.hpp actors/job/job_summary.hpp actors/job/config_bounds.hpp actors/job/ps_client.hpp actors/cluster/cluster_client.hpp actors/cluster/node_address.hpp
  actors/net/cluster_secret.hpp actors/net/tls.hpp actors/core/client_future.hpp actors/core/client_step.hpp actors/core/job_event.hpp messages/wire_bits.hpp actors/core/consistency.hpp actors/core/optimizer.hpp
  actors/core/optimizer_config.hpp actors/core/table_limits.hpp actors/core/eviction_policy.hpp actors/core/chain_options.hpp
  actors/core/fault_kind.hpp actors/core/worker_schedule.hpp actors/faults/fault_plan.hpp actors/faults/recovery.hpp
  actors/metrics/metrics.hpp actors/metrics/metrics_http.hpp actors/metrics/metrics_file.hpp
  messages/errors.hpp
  models/model.hpp models/model_configs.hpp models/model_registry.hpp
  models/parameter_layout.hpp models/span.hpp models/batch_schedule.hpp
  models/evaluation.hpp models/partial_evaluation.hpp models/auc.hpp)
foreach(header ${KEEL_PUBLIC_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/keel/${dir})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/actors/keel.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/keel)
install(EXPORT keel-targets NAMESPACE keel:: DESTINATION ${KEEL_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/keel-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/keel-config.cmake INSTALL_DESTINATION ${KEEL_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/keel-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/keel-config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/keel-config-version.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake
  DESTINATION ${KEEL_INSTALL_CMAKEDIR})
