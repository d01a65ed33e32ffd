package http

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/suanli/suanli"
)

var _ suanli.RentalService = (*Client)(nil)

// CreateFleet rents several instances in one request.
func (c *Client) CreateFleet(ctx context.Context, fc suanli.FleetCreate) (*suanli.FleetResult, error) {
	var r suanli.FleetResult
	return &r, c.do(ctx, c.HTTP, http.MethodPost, "/v1/fleets", rentalBody(fc, fc.InstanceCreate), &r)
}

// ChangeBid changes an interruptible instance's bid.
func (c *Client) ChangeBid(ctx context.Context, id int64, bid suanli.Money) (*suanli.Instance, error) {
	var in suanli.Instance
	return &in, c.do(ctx, c.HTTP, http.MethodPost, fmt.Sprintf("/v1/instances/%d/bid", id), BidRequest{Bid: bid}, &in)
}

// StartInstanceWith starts an instance, queueing the start with opt.Wait.
func (c *Client) StartInstanceWith(ctx context.Context, id int64, opt suanli.StartOptions) (*suanli.Instance, error) {
	var in suanli.Instance
	return &in, c.do(ctx, c.HTTP, http.MethodPost, fmt.Sprintf("/v1/instances/%d/start", id), opt, &in)
}

// RecreateInstance creates a new instance like id on another host.
func (c *Client) RecreateInstance(ctx context.Context, id int64, r suanli.Recreate) (*suanli.RecreateResult, error) {
	var res suanli.RecreateResult
	return &res, c.do(ctx, c.HTTP, http.MethodPost, fmt.Sprintf("/v1/instances/%d/recreate", id), r, &res)
}

// ReserveInstance prepays days of an on-demand instance.
func (c *Client) ReserveInstance(ctx context.Context, id int64, days int) (*suanli.Reservation, error) {
	var r suanli.Reservation
	return &r, c.do(ctx, c.HTTP, http.MethodPost, fmt.Sprintf("/v1/instances/%d/reservation", id), ReserveRequest{Days: days}, &r)
}

// CancelReservation cancels an instance's reservation early.
func (c *Client) CancelReservation(ctx context.Context, id int64) (*suanli.Reservation, error) {
	var r suanli.Reservation
	return &r, c.do(ctx, c.HTTP, http.MethodDelete, fmt.Sprintf("/v1/instances/%d/reservation", id), nil, &r)
}

// ActiveReservation returns an instance's active reservation (ENOTFOUND when none).
func (c *Client) ActiveReservation(ctx context.Context, id int64) (*suanli.Reservation, error) {
	var r suanli.Reservation
	return &r, c.get(ctx, fmt.Sprintf("/v1/instances/%d/reservation", id), &r)
}

// MarketPrices returns price history.
func (c *Client) MarketPrices(ctx context.Context, q suanli.PriceQuery) (*suanli.PriceStats, error) {
	v := url.Values{"q": {q.Query}}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	if q.Buckets > 0 {
		v.Set("buckets", strconv.Itoa(q.Buckets))
	}
	var st suanli.PriceStats
	return &st, c.get(ctx, "/v1/market/prices?"+v.Encode(), &st)
}
