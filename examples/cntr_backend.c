/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Ask rscntr which backend serves each counter, through its extension header.
 *
 *     #include <rdma/fi_ext_rscntr.h>
 *     struct fi_rscntr_domain_ops *ops;
 *     fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, (void **) &ops, NULL);
 *     enum fi_rscntr_backend backend;
 *     ops->cntr_backend(cntr, &backend);
 *
 * fi_open_ops fails (-FI_ENOSYS) on a domain of any other provider, so the same code runs
 * unchanged when another provider is picked. Set RSCNTR_EXPECT_BACKEND=software or =hardware to
 * make the program fail unless every counter has that backend (handy in a deployment check).
 *
 * Build: cc cntr_backend.c -o cntr_backend $(pkg-config --cflags --libs libfabric)
 *        (fi_ext_rscntr.h is installed next to libfabric's headers; from the source tree add
 *        -I<rscntr>/include)
 * Run:   FI_PROVIDER=rscntr ./cntr_backend
 *        (add FI_PROVIDER_PATH=<directory of librscntr-fi.so> unless rscntr is installed in
 *        libfabric's provider directory). Exits 0 when every check passes.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_rscntr.h>

#define DIE(...)                                                                          \
	do {                                                                              \
		fprintf(stderr, "cntr_backend: FAIL: " __VA_ARGS__);                      \
		fprintf(stderr, "\n");                                                    \
		exit(1);                                                                  \
	} while (0)

static const char *backend_name(enum fi_rscntr_backend b)
{
	switch (b) {
	case FI_RSCNTR_BACKEND_SOFTWARE: return "software";
	case FI_RSCNTR_BACKEND_HARDWARE: return "hardware";
	default: return NULL;
	}
}

int main(void)
{
	static const struct {
		enum fi_wait_obj wait_obj;
		const char *name;
	} kinds[] = {
		{ FI_WAIT_NONE, "FI_WAIT_NONE" },
		{ FI_WAIT_UNSPEC, "FI_WAIT_UNSPEC" },
		{ FI_WAIT_YIELD, "FI_WAIT_YIELD" },
		{ FI_WAIT_FD, "FI_WAIT_FD" },
	};
	const char *expect = getenv("RSCNTR_EXPECT_BACKEND");
	struct fi_rscntr_domain_ops *ops;
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	int ret;

	hints = fi_allocinfo();
	if (!hints)
		DIE("fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("rscntr");
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &info);
	if (ret)
		DIE("fi_getinfo: %s (is rscntr installed, or FI_PROVIDER_PATH set?)", fi_strerror(-ret));
	if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)) ||
	    (ret = fi_domain(fabric, info, &domain, NULL)))
		DIE("fi_fabric/fi_domain: %s", fi_strerror(-ret));

	ret = fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, (void **) &ops, NULL);
	if (ret)
		DIE("fi_open_ops(%s): %s (not an rscntr domain?)", FI_RSCNTR_DOMAIN_OPS_V1,
		    fi_strerror(-ret));
	/* A newer rscntr may append ops: check the table is large enough for the ones used. */
	if (ops->size < offsetof(struct fi_rscntr_domain_ops, cntr_backend) +
			sizeof(ops->cntr_backend) || !ops->cntr_backend)
		DIE("ops table too small (%zu bytes)", ops->size);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP,
					     .wait_obj = kinds[i].wait_obj };
		enum fi_rscntr_backend backend;
		struct fid_cntr *cntr;

		if ((ret = fi_cntr_open(domain, &attr, &cntr, NULL)))
			DIE("fi_cntr_open(%s): %s", kinds[i].name, fi_strerror(-ret));
		if ((ret = ops->cntr_backend(cntr, &backend)))
			DIE("cntr_backend(%s): %s", kinds[i].name, fi_strerror(-ret));
		const char *name = backend_name(backend);
		if (!name)
			DIE("cntr_backend(%s) returned unknown backend %d", kinds[i].name, (int) backend);
		if (expect && strcmp(expect, name))
			DIE("counter with %s has the %s backend, expected %s", kinds[i].name, name,
			    expect);
		printf("counter with %-14s: %s backend\n", kinds[i].name, name);

		/* Bad arguments are refused, not crashed on. */
		if (ops->cntr_backend(cntr, NULL) != -FI_EINVAL ||
		    ops->cntr_backend(NULL, &backend) != -FI_EINVAL)
			DIE("cntr_backend accepted a NULL argument");
		fi_close(&cntr->fid);
	}
	printf("cntr_backend: PASS\n");

	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
