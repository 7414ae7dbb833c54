# The optional CUDA backend.
#
# BP_CUDA=AUTO (default) builds it when nvcc is found (on PATH, in $CUDACXX or under
# /usr/local/cuda), ON requires it, OFF never looks. Without it the build is exactly
# the CPU build: no source, flag or library of CUDA is involved.
#
# With it:
#   - core/device.c is compiled with BP_HAVE_CUDA and asks the CUDA runtime for GPUs,
#     train/device.c with it opens the cuda backend and the models' GPU implementations;
#     every target gets CUDA::cudart through BP_DEPS;
#   - the GPU code of each layer lives in src/<layer>/cuda/ (*.cu by nvcc, *.c by the
#     C compiler) and is built into one object library per layer, bp_<layer>_cuda,
#     whose objects join libbagpipe; BP_CUDA_DEPS (the runtime, libdl for cuBLAS, which
#     is opened with the first GPU context, and NCCL) come with it;
#   - kernels are compiled for sm_90 (H100/H200) as machine code plus compute_90 PTX,
#     which the driver compiles for newer GPUs (CMAKE_CUDA_ARCHITECTURES overrides).
set(BP_CUDA AUTO CACHE STRING "CUDA backend: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE BP_CUDA PROPERTY STRINGS AUTO ON OFF)
set(BP_HAVE_CUDA OFF)
set(BP_HAVE_NCCL OFF)

# The sanitizers and the fuzzers instrument C only and do not mix with the CUDA runtime
# (ASan's shadow memory collides with its mappings): AUTO leaves CUDA out of them.
if(BP_CUDA STREQUAL "AUTO" AND (BP_SANITIZE OR BP_TSAN OR BP_FUZZ))
  set(BP_CUDA_WANTED OFF)
else()
  set(BP_CUDA_WANTED ${BP_CUDA})
endif()
if(NOT BP_CUDA_WANTED STREQUAL "OFF")
  if(NOT DEFINED ENV{CUDACXX} AND NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(BP_HAVE_CUDA ON)
  elseif(BP_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BP_CUDA=ON but no CUDA compiler (nvcc) was found; set CUDACXX")
  endif()
endif()

if(BP_HAVE_CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_FLAGS_RELEASE "-O3 -g -lineinfo")
  # Warnings are errors in device and host code alike; no fast math anywhere, so the
  # kernels round as the CPU code does.
  add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>
                      "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcompiler -Wall,-Wextra,-Werror>")
  find_library(BP_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(BP_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(BP_NCCL_LIBRARY AND BP_NCCL_INCLUDE)
    set(BP_HAVE_NCCL ON)
  endif()
  message(STATUS "bagpipe: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${BP_HAVE_NCCL})")
  list(APPEND BP_DEPS CUDA::cudart)
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/core/device.c
                              ${CMAKE_SOURCE_DIR}/src/train/device.c PROPERTIES
                              COMPILE_DEFINITIONS BP_HAVE_CUDA)
  # cuBLAS is opened when a GPU context is made (core/cuda/context.cu), not linked:
  # loading it costs every command half a second and 200 MB, the CPU's included.
  set(BP_CUDA_DEPS CUDA::cudart ${CMAKE_DL_LIBS})
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/core/cuda/context.cu PROPERTIES
                              COMPILE_DEFINITIONS BP_CUBLAS_DIR="${CUDAToolkit_LIBRARY_DIR}")
  if(BP_HAVE_NCCL)
    list(APPEND BP_CUDA_DEPS ${BP_NCCL_LIBRARY})
  endif()
else()
  message(STATUS "bagpipe: CUDA backend off (BP_CUDA=${BP_CUDA})")
endif()

# The GPU object libraries of each layer; their objects are added to the layer's
# library and to BP_OBJECTS.
macro(bp_cuda_targets)
  # The backend table's element-wise kernels round as the cpu code does (no contraction
  # into fused multiply-adds), so they give its bits.
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/core/cuda/vector.cu PROPERTIES
                              COMPILE_OPTIONS "--fmad=false")
  foreach(layer core compress comm nn)
    file(GLOB BP_${layer}_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${layer}/cuda/*.cu
         ${CMAKE_SOURCE_DIR}/src/${layer}/cuda/*.c)
    if(BP_${layer}_CUDA_SRC)
      add_library(bp_${layer}_cuda OBJECT ${BP_${layer}_CUDA_SRC})
      target_include_directories(bp_${layer}_cuda PUBLIC ${BP_INCLUDES})
      target_link_libraries(bp_${layer}_cuda PUBLIC ${BP_DEPS} ${BP_CUDA_DEPS})
      if(BP_HAVE_NCCL)
        target_include_directories(bp_${layer}_cuda PRIVATE ${BP_NCCL_INCLUDE})
        target_compile_definitions(bp_${layer}_cuda PRIVATE BP_HAVE_NCCL)
      endif()
      list(APPEND BP_OBJECTS $<TARGET_OBJECTS:bp_${layer}_cuda>)
      target_sources(bp_${layer} PRIVATE $<TARGET_OBJECTS:bp_${layer}_cuda>)
      target_link_libraries(bp_${layer} PUBLIC ${BP_CUDA_DEPS})
    endif()
  endforeach()
endmacro()
