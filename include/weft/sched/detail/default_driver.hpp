#pragma once

// The park driver a runtime's workers get when runtime_options::make_driver is empty.
// Implemented in src/sched/default_driver.cpp.
//
// sched never includes io (core < sched < io), yet the default runtime must sleep in reactors
// so that IO works on it with no set-up. The layer that implements a reactor installs its
// factory here while the program starts; every runtime made afterwards with an empty
// make_driver uses it. weft::io installs its reactors from the object file that every IO
// operation links (src/io/backend.cpp, which resolves the backend each operation asks for), so
// a program that does IO gets a reactor per worker, and a program of weft::sched alone parks
// its workers on a futex.
//
// NOTE: the installation is a static initialiser. A runtime constructed during the static
// initialisation of another translation unit may come first and park on a futex; give it
// make_driver explicitly (weft::io_runtime_options()).

#include <functional>
#include <memory>

#include "weft/sched/driver.hpp"

namespace weft::detail {

using driver_factory = std::function<std::unique_ptr<park_driver>(unsigned worker)>;

/// Makes the driver factory of one runtime; called once per runtime construction, on the
/// constructing thread, and may throw (the constructor then throws).
using default_driver_source = auto (*)() -> driver_factory;

/// Installs `source` (nullptr: none, a futex per worker); any thread. The pointer is stored
/// with release and read with acquire by default_driver_factory, so what the source reads was
/// set up before it was installed.
void install_default_driver(default_driver_source source) noexcept;

/// The factory for a runtime whose options name none: the installed source's, else empty
/// (the worker then makes a futex driver).
[[nodiscard]] auto default_driver_factory() -> driver_factory;

}  // namespace weft::detail
