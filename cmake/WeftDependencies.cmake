# The C libraries behind weft's optional bus libraries, as imported targets with names that do
# not depend on how they were found. Included by weft's own CMakeLists.txt (to build) and by the
# installed weft-config.cmake (to find them again on the user's machine when a component that
# needs them is asked for): the installed weft-bus_*-targets.cmake name weft_deps::<name>, so
# both sides must make the same target.

# weft_c_dependency(NAME PKG LIB HEADER [PATH_SUFFIXES dir...])
# Makes the INTERFACE IMPORTED target weft_deps::NAME from the pkg-config module PKG, or else
# from the library LIB and the directory holding HEADER, found by name. Sets in the caller:
#   weft_deps_NAME_FOUND        TRUE or FALSE (then no target is made)
#   weft_deps_NAME_PC_REQUIRES  PKG when pkg-config found it (for a .pc file's Requires:)
#   weft_deps_NAME_PC_LIBS      otherwise the library's path (for a .pc file's Libs:)
function(weft_c_dependency name pkg lib header)
    cmake_parse_arguments(arg "" "" "PATH_SUFFIXES" ${ARGN})
    set(weft_deps_${name}_PC_REQUIRES "" PARENT_SCOPE)
    set(weft_deps_${name}_PC_LIBS "" PARENT_SCOPE)
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
        pkg_check_modules(weft_deps_${name}_pc QUIET IMPORTED_TARGET ${pkg})
    endif()
    if(TARGET PkgConfig::weft_deps_${name}_pc)
        set(link PkgConfig::weft_deps_${name}_pc)
        set(weft_deps_${name}_PC_REQUIRES ${pkg} PARENT_SCOPE)
    else()
        find_library(WEFT_DEPS_${name}_LIBRARY ${lib})
        find_path(WEFT_DEPS_${name}_INCLUDE_DIR ${header} PATH_SUFFIXES ${arg_PATH_SUFFIXES})
        if(NOT WEFT_DEPS_${name}_LIBRARY OR NOT WEFT_DEPS_${name}_INCLUDE_DIR)
            set(weft_deps_${name}_FOUND FALSE PARENT_SCOPE)
            return()
        endif()
        set(link ${WEFT_DEPS_${name}_LIBRARY})
        set(weft_deps_${name}_PC_LIBS ${WEFT_DEPS_${name}_LIBRARY} PARENT_SCOPE)
    endif()
    if(NOT TARGET weft_deps::${name})
        add_library(weft_deps::${name} INTERFACE IMPORTED)
        set_target_properties(weft_deps::${name} PROPERTIES INTERFACE_LINK_LIBRARIES "${link}")
        if(WEFT_DEPS_${name}_INCLUDE_DIR)
            set_target_properties(weft_deps::${name} PROPERTIES
                INTERFACE_INCLUDE_DIRECTORIES "${WEFT_DEPS_${name}_INCLUDE_DIR}")
        endif()
    endif()
    set(weft_deps_${name}_FOUND TRUE PARENT_SCOPE)
endfunction()
