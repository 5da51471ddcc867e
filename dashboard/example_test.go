package dashboard_test

import (
	"context"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/dashboard"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/resizeimage"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
)

// requireAdmin stands for the service's own authentication middleware.
func requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "ops" || pass != os.Getenv("OPS_PASSWORD") {
			w.Header().Set("WWW-Authenticate", `Basic realm="jobs"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// The dashboard mounted under /admin/jobs/ of a service, behind its
// authentication, with retry and cancel enabled.
func ExampleNew() {
	pool, err := pgxpool.New(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	dash, err := dashboard.New(dashboard.Config{
		Queues:  []skipjack.QueueAdmin{sendemail.Admin(pool), resizeimage.Admin(pool)},
		Actions: true,
		Title:   "shop jobs",
		// The name the reverse proxy in front passes on as the Host.
		AllowedHosts: []string{"ops.example.com"},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/jobs/", requireAdmin(http.StripPrefix("/admin/jobs", dash)))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
