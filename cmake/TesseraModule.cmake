# tessera_add_module(NAME <name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...] [SCHEMAS x.capnp ...])
#
# One module = one folder = one static library `tessera_<name>` (alias tessera::<name>),
# namespace tessera::<name>. Public headers live in include/tessera/<name>/, private
# sources and headers in src/. Cap'n Proto schemas are compiled into the module and their
# generated headers stay private to it (codecs convert to domain types at the edge).
function(tessera_add_module)
  cmake_parse_arguments(M "" "NAME" "SOURCES;DEPS;PRIVATE_DEPS;SCHEMAS" ${ARGN})
  set(target tessera_${M_NAME})
  set(schema_sources "")
  if(M_SCHEMAS)
    set(CAPNPC_SRC_PREFIX ${CMAKE_CURRENT_SOURCE_DIR}/src)
    set(CAPNPC_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/generated)
    file(MAKE_DIRECTORY ${CAPNPC_OUTPUT_DIR})
    set(schema_files "")
    foreach(s ${M_SCHEMAS})
      list(APPEND schema_files ${CMAKE_CURRENT_SOURCE_DIR}/src/${s})
    endforeach()
    capnp_generate_cpp(capnp_srcs capnp_hdrs ${schema_files})
    set(schema_sources ${capnp_srcs} ${capnp_hdrs})
  endif()
  add_library(${target} STATIC ${M_SOURCES} ${schema_sources})
  add_library(tessera::${M_NAME} ALIAS ${target})
  target_include_directories(${target}
    PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src ${CMAKE_CURRENT_BINARY_DIR}/generated)
  target_link_libraries(${target} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  if(M_SCHEMAS)
    target_link_libraries(${target} PRIVATE CapnProto::capnp CapnProto::kj)
  endif()
endfunction()

# tessera_add_test(NAME <name> SOURCES ... DEPS ...): a Catch2 test binary registered with ctest.
function(tessera_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} tessera_catch_main)
  # -w NoTests: a test whose name ctest cannot pass through (a ";" splits a CMake list) fails
  # instead of passing without running.
  catch_discover_tests(${T_NAME} TEST_PREFIX "${T_NAME}:" EXTRA_ARGS -w NoTests
                       PROPERTIES TIMEOUT 120)
endfunction()
