# Run by `cmake --install`: LibTorch's shared libraries and the CUDA
# libraries of the wheel's nvidia-* packages go to <prefix>/lib/latentlab in
# the wheel's own layout (torch/lib beside nvidia/<package>/lib), so that the
# $ORIGIN-relative RUNPATHs they carry still find each other, and our
# programs find them through theirs ($ORIGIN/../lib/latentlab/torch/lib).
# Each file is hard-linked where the prefix shares the venv's filesystem and
# copied where it does not (a cluster's shared software folder). Set by
# LatentLabTorch.cmake: LATENTLAB_INSTALL_TORCH_LIB, LATENTLAB_INSTALL_NVIDIA.
set(_dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/latentlab")
set(_files "")
file(GLOB _torch RELATIVE "${LATENTLAB_INSTALL_TORCH_LIB}/.." "${LATENTLAB_INSTALL_TORCH_LIB}/*.so*")
# The Python bindings need a Python; the programs never load them.
list(FILTER _torch EXCLUDE REGEX "libtorch_python\\.so$")
foreach(_f IN LISTS _torch)
  list(APPEND _files "${LATENTLAB_INSTALL_TORCH_LIB}/../${_f}|torch/${_f}")
endforeach()
if(LATENTLAB_INSTALL_NVIDIA AND IS_DIRECTORY "${LATENTLAB_INSTALL_NVIDIA}")
  file(GLOB_RECURSE _nvidia RELATIVE "${LATENTLAB_INSTALL_NVIDIA}" "${LATENTLAB_INSTALL_NVIDIA}/*.so*")
  list(FILTER _nvidia INCLUDE REGEX "/lib/[^/]+$")
  foreach(_f IN LISTS _nvidia)
    list(APPEND _files "${LATENTLAB_INSTALL_NVIDIA}/${_f}|nvidia/${_f}")
  endforeach()
endif()
set(_copied 0)
foreach(_pair IN LISTS _files)
  string(REPLACE "|" ";" _pair "${_pair}")
  list(GET _pair 0 _src)
  list(GET _pair 1 _rel)
  get_filename_component(_dir "${_dest}/${_rel}" DIRECTORY)
  file(MAKE_DIRECTORY "${_dir}")
  file(REMOVE "${_dest}/${_rel}")
  file(CREATE_LINK "${_src}" "${_dest}/${_rel}" RESULT _linked)
  if(NOT _linked EQUAL 0)
    file(COPY_FILE "${_src}" "${_dest}/${_rel}")
    math(EXPR _copied "${_copied} + 1")
  endif()
endforeach()
list(LENGTH _files _count)
message(STATUS "LibTorch and CUDA libraries: ${_count} files in ${_dest} (${_copied} copied, the rest hard-linked)")
