# Finds liburing (Debian: liburing-dev). Sets LIBURING_LIBRARY, LIBURING_INCLUDE_DIR and
# LibUring_FOUND. The library is linked by path so that weft's exported targets need no
# find_dependency for it.
find_path(LIBURING_INCLUDE_DIR liburing.h)
find_library(LIBURING_LIBRARY NAMES uring)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibUring REQUIRED_VARS LIBURING_LIBRARY LIBURING_INCLUDE_DIR)
mark_as_advanced(LIBURING_INCLUDE_DIR LIBURING_LIBRARY)
