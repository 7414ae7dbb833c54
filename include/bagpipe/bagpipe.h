/* Everything public of bagpipe's communication library in one include. */
#ifndef BAGPIPE_BAGPIPE_H
#define BAGPIPE_BAGPIPE_H

#include "bagpipe/comm.h"
#include "bagpipe/compress.h"
#include "bagpipe/status.h"

#endif
