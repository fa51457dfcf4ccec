package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/intakehq/intake/pkg/subscriber"
)

func newSubscriberCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "subscriber",
		Short: "The inbox kit for services that consume INTAKE_OUT",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "schema",
		Short: "Print the SQL of a subscriber's inbox table and the rule that uses it (apply it to the subscriber's database)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), subscriber.Schema)
			return err
		},
	})
	return cmd
}
