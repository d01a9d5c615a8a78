# Installs weft into a scratch prefix, then builds and runs programs against it as a user would:
# with find_package(weft COMPONENTS ...) (every optional library the build has), and with
# pkg-config (weft.pc and weft-bus-*.pc). Asking for a component the installation lacks must
# fail with weft's reason. COMPONENTS / NOT_BUILT: comma-separated component names.
# ASAN_CONSUMER: ON when weft was built without sanitizers; then an HTTP service built with
# -fsanitize=address against it must run clean.
function(run)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
    endif()
    message(STATUS "${out}")
endfunction()
# A built program: the same, bounded (each talks to nothing or to a refused port).
function(run_program)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
        TIMEOUT 60)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
    endif()
    message(STATUS "${out}")
endfunction()

string(REPLACE "," ";" components "${COMPONENTS}")
string(REPLACE "," ";" not_built "${NOT_BUILT}")

file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BUILD})
run(${CMAKE_COMMAND} --install ${WEFT_BUILD_DIR} --prefix ${PREFIX})

# find_package
run(${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BUILD} -G Ninja
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
    -DWEFT_COMPONENTS=${COMPONENTS} -DWEFT_ASAN_CONSUMER=${ASAN_CONSUMER})
run(${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
run_program(${CONSUMER_BUILD}/consumer)
run_program(${CONSUMER_BUILD}/consumer_bus_memory)
if(ASAN_CONSUMER)
    # Any AddressSanitizer report ends the program with a non-zero status.
    run_program(${CONSUMER_BUILD}/consumer_http_post_asan)
endif()
foreach(component IN LISTS components)
    if(component STREQUAL "bus_sqlite")
        run_program(${CONSUMER_BUILD}/consumer_${component} ${CONSUMER_BUILD}/outbox.db)
    else()
        run_program(${CONSUMER_BUILD}/consumer_${component})  # no server: expects the named error
    endif()
endforeach()

# A component that is not there: an unknown name, and each optional library not built.
foreach(ask IN LISTS not_built ITEMS no_such_component)
    if(ask STREQUAL "no_such_component")
        set(expect "weft has no component \"no_such_component\"")
    else()
        set(expect "weft component \"${ask}\" was not built in the weft installed at")
    endif()
    set(dir ${CONSUMER_BUILD}-missing-${ask})
    file(REMOVE_RECURSE ${dir})
    execute_process(COMMAND ${CMAKE_COMMAND} -S ${MISSING_SRC} -B ${dir} -G Ninja
            -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX} -DWEFT_ASK=${ask}
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    string(FIND "${out}${err}" "${expect}" at)
    if(rc EQUAL 0 OR at EQUAL -1)
        message(FATAL_ERROR "find_package(weft COMPONENTS ${ask}): expected a failure saying "
            "'${expect}', got (${rc}):\n${out}\n${err}")
    endif()
    file(REMOVE_RECURSE ${dir})
    execute_process(COMMAND ${CMAKE_COMMAND} -S ${MISSING_SRC} -B ${dir} -G Ninja
            -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX} -DWEFT_ASK=${ask}
            -DWEFT_OPTIONAL=ON
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    string(FIND "${out}${err}" "weft: optional ${expect}" at)
    if(NOT rc EQUAL 0 OR at EQUAL -1)
        message(FATAL_ERROR "find_package(weft OPTIONAL_COMPONENTS ${ask}): expected success "
            "saying 'weft: optional ${expect}', got (${rc}):\n${out}\n${err}")
    endif()
    message(STATUS "COMPONENTS ${ask}: refused as expected, optional: reported missing")
endforeach()

# pkg-config
find_program(PKG_CONFIG pkg-config)
if(NOT PKG_CONFIG)
    message(FATAL_ERROR "pkg-config is needed to check weft.pc")
endif()
file(GLOB_RECURSE pc_file ${PREFIX}/weft.pc)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
function(build_with_pkg_config module source out)
    execute_process(COMMAND ${PKG_CONFIG} --cflags --libs ${module}
        RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "pkg-config ${module} failed: ${err}")
    endif()
    separate_arguments(flags UNIX_COMMAND "${flags}")
    run(${CXX} ${CONSUMER_SRC}/${source} -o ${out} ${flags})
endfunction()
build_with_pkg_config(weft bus_memory.cpp ${CONSUMER_BUILD}/pc_bus_memory)
run_program(${CONSUMER_BUILD}/pc_bus_memory)
foreach(component IN LISTS components)
    string(REPLACE "_" "-" module "weft-${component}")
    build_with_pkg_config(${module} ${component}.cpp ${CONSUMER_BUILD}/pc_${component})
    if(component STREQUAL "bus_sqlite")
        run_program(${CONSUMER_BUILD}/pc_${component} ${CONSUMER_BUILD}/pc_outbox.db)
    else()
        run_program(${CONSUMER_BUILD}/pc_${component})
    endif()
endforeach()
