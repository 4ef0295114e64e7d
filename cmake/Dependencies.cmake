# Finds every dependency the design card allows: xxHash, SQLite, CLI11, nlohmann/json, Catch2
# (Debian packages), and optionally the CUDA toolkit and torch. Missing optional parts are
# reported once, clearly, at configure time.
find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Catch2 2 REQUIRED)
include(Catch)

find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY NAMES xxhash REQUIRED)
add_library(tdbg_xxhash INTERFACE)
target_include_directories(tdbg_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(tdbg_xxhash INTERFACE ${XXHASH_LIBRARY})

# Python interpreter that has torch: always /usr/bin/python3 on Debian unless told otherwise.
set(TDBG_PYTHON "/usr/bin/python3" CACHE FILEPATH "Python interpreter that has torch")

# CUDA toolkit (optional).
set(TDBG_HAVE_CUDA OFF)
if(TDBG_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(TDBG_HAVE_CUDA ON)
      if(NOT CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "52")
        set(CMAKE_CUDA_ARCHITECTURES 80 90)
      endif()
      message(STATUS "tdbg: CUDA ${CUDAToolkit_VERSION} found; GPU parts are built")
    endif()
  endif()
endif()
if(NOT TDBG_HAVE_CUDA)
  message(STATUS "tdbg: CUDA toolkit not found; GPU hashing and kernel interception are skipped")
endif()

# Torch (optional): through the Python that has it, or libtorch's own CMake package.
set(TDBG_HAVE_TORCH OFF)
if(TDBG_WITH_TORCH)
  execute_process(
    COMMAND ${TDBG_PYTHON} -c "import torch, os; print(torch.utils.cmake_prefix_path if os.path.isdir(torch.utils.cmake_prefix_path) else '')"
    OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _torch_rc)
  if(_torch_rc EQUAL 0 AND _torch_prefix)
    list(APPEND CMAKE_PREFIX_PATH ${_torch_prefix})
  endif()
  # Torch's config drags in CUDA checks of its own; keep them quiet on a CPU build.
  find_package(Torch QUIET)
  if(Torch_FOUND)
    set(TDBG_HAVE_TORCH ON)
    message(STATUS "tdbg: torch found (${TORCH_LIBRARIES}); the dispatch hook is built")
    # Everything tdbg compiles against torch's headers links this. libtorch is a release build,
    # and some of its classes have members only without NDEBUG (`RecordFunction::inputs_valid_`):
    # code compiled without NDEBUG (a Debug or sanitizer build) would see another layout.
    add_library(tdbg_torch_headers INTERFACE)
    target_include_directories(tdbg_torch_headers INTERFACE ${TORCH_INCLUDE_DIRS})
    target_compile_definitions(tdbg_torch_headers INTERFACE NDEBUG)
    target_compile_options(tdbg_torch_headers INTERFACE ${TORCH_CXX_FLAGS} -Wno-unused-parameter)
  else()
    message(STATUS "tdbg: torch not found; libtdbg_torch.so and the torch tests are skipped")
  endif()
endif()
