# The optional matrix libraries of core/blas.h, compiled in when their Debian
# packages are installed (libblis-dev, libdnnl-dev); OpenBLAS is always there and
# stays the default. Each adds BP_HAVE_<NAME> and its library to BP_DEPS after
# OpenBLAS, so that the names both export (BLIS carries a CBLAS) resolve to OpenBLAS.
#
# BLIS's blis.h sits in a folder with a cblas.h of its own, which must not shadow
# OpenBLAS's: the folder is not put on the include path, blis.h is included by its
# full name (BP_BLIS_HEADER).
find_path(BP_BLIS_DIR blis.h PATHS /usr/include /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}
          PATH_SUFFIXES blis blis-openmp blis-pthread blis-serial NO_DEFAULT_PATH)
find_library(BP_BLIS_LIB blis)
if(BP_BLIS_DIR AND BP_BLIS_LIB)
  add_compile_definitions(BP_HAVE_BLIS "BP_BLIS_HEADER=\"${BP_BLIS_DIR}/blis.h\"")
  list(APPEND BP_DEPS ${BP_BLIS_LIB})
  message(STATUS "matrix products: BLIS ${BP_BLIS_LIB}")
endif()

# Debian's oneDNN runs on GNU OpenMP, whose thread count core/blas_dnnl.c sets.
find_path(BP_DNNL_DIR oneapi/dnnl/dnnl.h)
find_library(BP_DNNL_LIB dnnl)
find_library(BP_GOMP_LIB gomp PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}
             /lib/${CMAKE_LIBRARY_ARCHITECTURE} PATH_SUFFIXES "" gcc/${CMAKE_LIBRARY_ARCHITECTURE}/12)
if(BP_DNNL_DIR AND BP_DNNL_LIB AND BP_GOMP_LIB)
  add_compile_definitions(BP_HAVE_DNNL)
  list(APPEND BP_DEPS ${BP_DNNL_LIB} ${BP_GOMP_LIB})
  message(STATUS "matrix products: oneDNN ${BP_DNNL_LIB}")
endif()
