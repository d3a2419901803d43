/* Looking up a layer's tensors through the weight-format interface
 * (plume_weights_find, plume/linear.h): shared by the native method and
 * every quant plugin. */
#include <stdio.h>
#include <string.h>

#include "plume/linear.h"

const plume_tensor *plume_weights_find(const plume_weights *w, const char *prefix,
                                       const char *suffix)
{
    char name[512];
    int n = suffix ? snprintf(name, sizeof name, "%s.%s", prefix, suffix)
                   : snprintf(name, sizeof name, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof name)
        return NULL;
    if (w->fmt->find)
        return w->fmt->find(w->ck, name);
    for (size_t i = 0, m = w->fmt->n_tensors(w->ck); i < m; i++) {
        const plume_tensor *t = w->fmt->tensor(w->ck, i);
        if (strcmp(t->name, name) == 0)
            return t;
    }
    return NULL;
}
