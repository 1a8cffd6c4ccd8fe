/* version.h - the release every program reports (aasd, aasctl, aas-mcp). */
#ifndef AAS_VERSION_H
#define AAS_VERSION_H

#define AAS_VERSION "0.2.0"

#endif
