# Finds LibTorch and defines the imported target latentlab::torch.
#
# Default: the C++ library bundled in the pinned `torch` wheel of the project
# venv (found through `python -c "import torch.utils; ..."`). The wheel is built
# with CUDA; its CUDA libraries come from the nvidia-* wheels next to it, so no
# CUDA toolkit is needed to build or run on CPU. With -DTorch_DIR=... a
# downloaded LibTorch is used through its own TorchConfig.cmake instead.

# latentlab::torch_openmp links the OpenMP runtime LibTorch itself loads (the
# one in its lib folder), so that the process has one thread pool; files of
# ours that call at::parallel_for (an inline template around `#pragma omp
# parallel`) are compiled with ${LATENTLAB_OPENMP_FLAGS}.
function(latentlab_torch_openmp libdir)
  file(GLOB _gomp "${libdir}/libgomp*.so*")
  add_library(latentlab_torch_openmp INTERFACE)
  if(_gomp)
    list(GET _gomp 0 _gomp)
    set(LATENTLAB_OPENMP_FLAGS -fopenmp PARENT_SCOPE)
    target_link_libraries(latentlab_torch_openmp INTERFACE "${_gomp}")
  else()
    find_package(OpenMP REQUIRED COMPONENTS CXX)
    message(STATUS "No libgomp next to LibTorch: our parallel loops use ${OpenMP_CXX_LIBRARIES}")
    set(LATENTLAB_OPENMP_FLAGS ${OpenMP_CXX_FLAGS} PARENT_SCOPE)
    target_link_libraries(latentlab_torch_openmp INTERFACE OpenMP::OpenMP_CXX)
  endif()
  add_library(latentlab::torch_openmp ALIAS latentlab_torch_openmp)
endfunction()

set(LATENTLAB_VENV "${CMAKE_SOURCE_DIR}/.venv" CACHE PATH "Project virtual environment")
find_program(LATENTLAB_TORCH_PYTHON NAMES python3 python
             HINTS "${LATENTLAB_VENV}/bin" NO_DEFAULT_PATH)
if(NOT LATENTLAB_TORCH_PYTHON)
  find_program(LATENTLAB_TORCH_PYTHON NAMES python3 python)
endif()

if(Torch_DIR)
  find_package(Torch REQUIRED CONFIG)
  add_library(latentlab_torch INTERFACE)
  target_link_libraries(latentlab_torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(latentlab_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  target_compile_options(latentlab_torch INTERFACE ${TORCH_CXX_FLAGS})
  add_library(latentlab::torch ALIAS latentlab_torch)
  set(LATENTLAB_TORCH_ROOT "${Torch_DIR}/../../..")
  set(LATENTLAB_INSTALL_TORCH_LIB "${LATENTLAB_TORCH_ROOT}/lib")
  latentlab_torch_openmp("${LATENTLAB_TORCH_ROOT}/lib")
  return()
endif()

execute_process(
  COMMAND "${LATENTLAB_TORCH_PYTHON}" -c
    "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__); print(int(torch.compiled_with_cxx11_abi()))"
  OUTPUT_VARIABLE _ll_torch_out RESULT_VARIABLE _ll_torch_rc
  ERROR_VARIABLE _ll_torch_err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _ll_torch_rc EQUAL 0)
  message(FATAL_ERROR
    "LibTorch not found: '${LATENTLAB_TORCH_PYTHON}' cannot import torch.\n"
    "Run packaging/setup-venv.sh (installs the pinned torch wheel into .venv), "
    "or pass -DTorch_DIR=<libtorch>/share/cmake/Torch.\n${_ll_torch_err}")
endif()
string(REPLACE "\n" ";" _ll_torch_lines "${_ll_torch_out}")
list(GET _ll_torch_lines 0 LATENTLAB_TORCH_ROOT)
list(GET _ll_torch_lines 1 LATENTLAB_TORCH_VERSION)
list(GET _ll_torch_lines 2 _ll_torch_abi)
message(STATUS "LibTorch ${LATENTLAB_TORCH_VERSION} from ${LATENTLAB_TORCH_ROOT} (cxx11 abi ${_ll_torch_abi})")
if(NOT _ll_torch_abi EQUAL 1)
  message(FATAL_ERROR "This LibTorch uses the pre-C++11 std::string ABI; Debian's Qt uses the C++11 ABI. Use a cxx11-abi build.")
endif()

set(_ll_lib "${LATENTLAB_TORCH_ROOT}/lib")
add_library(latentlab_torch INTERFACE)
target_include_directories(latentlab_torch SYSTEM INTERFACE
  "${LATENTLAB_TORCH_ROOT}/include"
  "${LATENTLAB_TORCH_ROOT}/include/torch/csrc/api/include")
target_compile_definitions(latentlab_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1 USE_DISTRIBUTED USE_C10D_GLOO)
set(_ll_libs "${_ll_lib}/libtorch.so" "${_ll_lib}/libtorch_cpu.so" "${_ll_lib}/libc10.so")
if(EXISTS "${_ll_lib}/libtorch_cuda.so")
  # Keep libtorch_cuda linked even though no symbol is referenced: it registers
  # the CUDA backend at load time (what TorchConfig.cmake does too).
  set(LATENTLAB_TORCH_HAS_CUDA ON)
  target_link_options(latentlab_torch INTERFACE
    "LINKER:--no-as-needed,${_ll_lib}/libtorch_cuda.so,${_ll_lib}/libc10_cuda.so,--as-needed")
  target_compile_definitions(latentlab_torch INTERFACE LATENTLAB_TORCH_CUDA=1)
endif()
target_link_libraries(latentlab_torch INTERFACE ${_ll_libs})
# The wheel's libraries find their CUDA peers through their own RUNPATH; ours
# only needs torch/lib: in the build tree CMake's own RUNPATH (the folder of
# the libraries linked by path), once installed $ORIGIN/../lib/latentlab/torch/lib
# (cmake/LatentLabInstallTorch.cmake puts the libraries there).
add_library(latentlab::torch ALIAS latentlab_torch)
set(LATENTLAB_INSTALL_TORCH_LIB "${_ll_lib}")
get_filename_component(_ll_site_dir "${LATENTLAB_TORCH_ROOT}" DIRECTORY)
set(LATENTLAB_INSTALL_NVIDIA "${_ll_site_dir}/nvidia")
latentlab_torch_openmp("${_ll_lib}")

# NCCL data parallelism: ProcessGroupNCCL.hpp needs the CUDA and NCCL headers
# matching the wheel, which its nvidia-* packages ship next to torch.
set(LATENTLAB_NCCL_INCLUDE_DIRS "")
get_filename_component(_ll_site "${LATENTLAB_TORCH_ROOT}" DIRECTORY)
file(GLOB _ll_cuda_inc "${_ll_site}/nvidia/cu*/include")
if(LATENTLAB_TORCH_HAS_CUDA AND _ll_cuda_inc AND EXISTS "${_ll_site}/nvidia/nccl/include/nccl.h")
  list(GET _ll_cuda_inc 0 _ll_cuda_inc)
  set(LATENTLAB_NCCL_INCLUDE_DIRS "${_ll_cuda_inc};${_ll_site}/nvidia/nccl/include")
  message(STATUS "NCCL data parallelism: headers from ${_ll_site}/nvidia")
endif()
